import type { Logger } from 'pino';
import { TransportError, type Address, type FileLimits, type Mentions, type OutgoingFile, type Platforms } from '../../platforms/platform.js';
import type { Destination, FailureCode, MessageBody, StoredKind } from './delivery.js';
import type { Doubt } from './delivery.reconcile.js';
import type { DeliveryRow } from './delivery.table.js';

export type Attachments = NonNullable<MessageBody['attachments']>;

/**
 * What the files module answers (the engine asks it through the ports): a delivery's attachments
 * checked before it is queued, and their bytes for the send.
 */
export interface AttachmentPorts {
  /** Every file stored and within `limits` (undefined: the platform attaches nothing); throws the contract's reason. */
  checkAttachments(attachments: Attachments, limits: FileLimits | undefined): Promise<void>;
  /** The files' bytes, in order; undefined when one is no longer stored. */
  attachmentBytes(attachments: Attachments): Promise<OutgoingFile[] | undefined>;
}

/**
 * What the send engine asks other modules, instead of reading their tables: given to it by the
 * wiring (src/app.ts).
 */
export interface DeliveryPorts {
  /** The channel a guild's named destination maps to; undefined: not mapped. */
  resolveDestination(guildId: string, destination: Destination): Promise<Address | undefined>;
  /**
   * Whether a user is registered now with `identity`'s bot (DMs and edits of DMs go only to users
   * registered with the bot they are sent as).
   */
  isRegistered(userId: string, identity: string): Promise<boolean>;
  /** The platform a user registered with `identity`'s bot registered on (their DMs go there); null: the home platform. */
  registeredOn(userId: string, identity: string): Promise<string | null>;
  /** Files out, answered by the files module (absent: attachments are refused). */
  checkAttachments?: AttachmentPorts['checkAttachments'];
  attachmentBytes?: AttachmentPorts['attachmentBytes'];
}

/** What a kind's target resolves to at send time: where to send once, or a refusal for good. */
export type SendResolution =
  | {
      address: Address;
      /** The url's guild part: the guild id, or `@me` for a DM. */
      scope: string;
      /** Who the message may notify (absent: no one). */
      mentions?: Mentions;
      /** The platform message it replies to (absent: none). */
      replyTo?: string;
    }
  | { refused: { code: FailureCode; reason: string } };

/** What a kind's resolver may use. */
export interface SendKindContext {
  readonly transports: Platforms;
  /** The identity the delivery is sent as (`default` for the platforms' own variables'). */
  readonly identity: string;
  readonly ports: DeliveryPorts;
  readonly signal: AbortSignal;
  readonly log: Logger;
}

/**
 * A kind of send, declared by the module that owns it (`reply` by commands, `handoff` by
 * handoffs, `post` and `dm` by deliveries): how its stored target resolves to an address, a url
 * scope and mentions, with its preconditions checked at send time. The engine then sends it once
 * with the same lifecycle and in-doubt rule as every other kind.
 */
export type SendKind<T = unknown> = ResolvedSendKind<T> | SelfSendingKind<T>;

/** A kind sent as one message with the row's nonce: it only says where. */
export interface ResolvedSendKind<T = unknown> {
  readonly kind: StoredKind;
  resolve(target: T, context: SendKindContext): Promise<SendResolution>;
}

/** How a self-sending kind's attempt ended (a failure is thrown, and the failure rule decides). */
export interface SelfSentOutcome {
  status: 'delivered' | 'unconfirmed' | 'failed';
  /** The platform's message ids, in order. */
  messageIds?: readonly string[];
  /** Herald's words for the caller (failed, unconfirmed), never content. */
  reason?: string;
}

/** What a self-sending kind's send or proof is given besides the resolver's context. */
export interface SelfSendContext extends SendKindContext {
  /** The row being attempted (its attempts count, created_at, request_id, body). */
  readonly row: DeliveryRow;
  /** Other rows of the same kind created since then (a proof tells their messages from this one's). */
  siblings(since: Date): Promise<DeliveryRow[]>;
}

/**
 * A kind whose send is not one message (a chat send: several lines, proven per platform by
 * `Chat.sentParts`). It says how to send and how to prove what was sent; the engine decides when
 * to prove, by the one in-doubt rule every kind follows (a doubt window recorded by a failure that
 * may have created something, the settle before looking, the final look-only check), and keeps
 * the lease, the failure rule, retries and recording.
 */
export interface SelfSendingKind<T = unknown> {
  readonly kind: StoredKind;
  /** The channel a send of `target` creates its messages in (the doubt window's channel). */
  channelOf(target: T): string;
  /** Send what `found` (parts proven already in the channel, by index) does not hold. */
  send(target: T, body: DeliveryRow['body'], context: SelfSendContext, found: ReadonlyMap<number, string>): Promise<SelfSentOutcome>;
  /** The parts an in-doubt attempt left in the channel (index → message id); undefined: the platform cannot tell. */
  prove(target: T, doubt: Doubt, context: SelfSendContext): Promise<Map<number, string> | undefined>;
}

/** A facet the transport lacks: refused for good (the accept path already refuses such kinds). */
export function facet<T>(present: T | undefined, what: string): T {
  if (present === undefined) throw new TransportError({ kind: 'rejected', detail: `the transport has no ${what}` });
  return present;
}
