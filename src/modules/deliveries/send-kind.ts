import type { Logger } from 'pino';
import { TransportError, type Address, type Mentions, type Transports } from '../../transports/transport.js';
import type { Destination, FailureCode, StoredKind } from './delivery.js';

/**
 * What the send engine asks other modules, instead of reading their tables: given to it by the
 * wiring (src/app.ts).
 */
export interface DeliveryPorts {
  /** The channel a guild's named destination maps to; undefined: not mapped. */
  resolveDestination(guildId: string, destination: Destination): Promise<Address | undefined>;
  /** Whether a user is registered now (DMs and edits of DMs go only to registered users). */
  isRegistered(userId: string): Promise<boolean>;
}

/** What a kind's target resolves to at send time: where to send once, or a refusal for good. */
export type SendResolution =
  | {
      address: Address;
      /** The url's guild part: the guild id, or `@me` for a DM. */
      scope: string;
      /** Who the message may notify (absent: no one). */
      mentions?: Mentions;
    }
  | { refused: { code: FailureCode; reason: string } };

/** What a kind's resolver may use. */
export interface SendKindContext {
  readonly transports: Transports;
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
export interface SendKind<T = unknown> {
  readonly kind: StoredKind;
  resolve(target: T, context: SendKindContext): Promise<SendResolution>;
}

/** A facet the transport lacks: refused for good (the accept path already refuses such kinds). */
export function facet<T>(present: T | undefined, what: string): T {
  if (present === undefined) throw new TransportError({ kind: 'rejected', detail: `the transport has no ${what}` });
  return present;
}
