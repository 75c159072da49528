import type { Generated, Selectable, Updateable } from 'kysely';
import type { TransportName } from '../../transports/transport.js';

/**
 * `pending` → `in_flight` (leased) → `delivered` | `unconfirmed` | `failed`. `unconfirmed`: the
 * lines were written but the platform gave no proof (or a re-drive could not tell): never resent.
 */
export type ChatSendStatus = 'pending' | 'in_flight' | 'delivered' | 'unconfirmed' | 'failed';

/** One chat send: its own outbox entry, like a delivery. */
export interface ChatSendTable {
  id: string;
  transport: TransportName;
  channel: string;
  sender: string;
  text: string;
  status: ChatSendStatus;
  /** For the caller: why it failed or is unconfirmed (Herald's words, never content). */
  reason: string | null;
  /** JSON array of platform message ids, one per line, in order. */
  message_ids: string | null;
  attempts: Generated<number>;
  created_at: Date;
  next_attempt_at: Date;
  lease_owner: string | null;
  lease_expires_at: Date | null;
}

export type ChatSendRow = Selectable<ChatSendTable>;
export type ChatSendUpdate = Updateable<ChatSendTable>;
