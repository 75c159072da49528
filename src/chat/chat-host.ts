import type { Card, Link } from '../modules/deliveries/delivery.js';

/** A message as a chat platform is asked to show it. */
export interface OutgoingMessage {
  content?: string;
  card?: Card;
  links?: Link[];
}

export interface SentMessage {
  channelId: string;
  messageId: string;
}

export interface SeenMessage extends SentMessage {
  authorId: string;
  /** When the platform created it (from its id, on Discord). */
  createdAt: Date;
  /** What the message shows, in the same shape as `fingerprint(OutgoingMessage)`. */
  fingerprint: string;
}

export interface ChannelInfo {
  id: string;
  guildId: string | undefined;
  isText: boolean;
}

/**
 * Why a chat-platform call failed, in the terms the dispatcher acts on: retry later, or fail the
 * delivery with a protocol code.
 */
export type ChatFailure =
  | {
      kind: 'transient';
      retryAfterMs?: number;
      detail: string;
      /**
       * A create that failed this way may still have created the message (a 5xx, a dropped
       * connection, a timeout after the request went out). False or absent: it certainly did not.
       */
      mayHaveCreated?: boolean;
    }
  | { kind: 'recipient_unreachable'; detail: string }
  | { kind: 'not_found'; detail: string }
  | { kind: 'rejected'; detail: string };

export class ChatHostError extends Error {
  constructor(readonly failure: ChatFailure) {
    super(failure.detail);
    this.name = 'ChatHostError';
  }
}

/** The chat platform Herald delivers to (Discord through discord.js; later IRC). */
export interface ChatHost {
  readonly capabilities: { readonly post: boolean; readonly dm: boolean; readonly edit: boolean };
  /** Send once: every call for one delivery passes the same nonce. */
  createMessage(channelId: string, message: OutgoingMessage, nonce: string, signal: AbortSignal): Promise<SentMessage>;
  /** The DM channel with a user (created if needed). */
  openDm(userId: string, signal: AbortSignal): Promise<string>;
  /** Replace the parts of a message that `message` includes. Idempotent. */
  editMessage(channelId: string, messageId: string, message: OutgoingMessage, signal: AbortSignal): Promise<void>;
  /**
   * Messages in a channel created from `from` to `until`, oldest first, reading at most `max`;
   * `complete` is false when `max` ran out before `until` was passed.
   */
  listMessagesBetween(channelId: string, from: Date, until: Date, max: number, signal: AbortSignal): Promise<{ messages: SeenMessage[]; complete: boolean }>;
  getChannel(channelId: string): Promise<ChannelInfo | undefined>;
  /** The bot's own user id (author of what Herald sends). */
  selfId(): Promise<string>;
  fingerprint(message: OutgoingMessage): string;
}
