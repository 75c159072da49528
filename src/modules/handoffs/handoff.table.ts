import type { Generated, Insertable, Selectable } from 'kysely';

/**
 * The replay record: one row per envelope event_id this bot took in for checking, on any replica,
 * kept until the envelope expires. `rate_limited` rows still count as seen (a replay of a refused
 * handoff is a replay) and toward the capacity.
 */
export interface HandoffEventTable {
  event_id: string;
  source_bot_id: string;
  outcome: 'accepted' | 'rate_limited';
  received_at: Date;
  expires_at: Date;
  /** The message that carried it (null for events recorded before it was kept). */
  message_id: string | null;
}

/** Accepted handoffs waiting for the agent: listed until acknowledged. */
export interface HandoffInboxTable {
  /** bigserial: the cursor. Read back as a string (pg's int8). */
  id: Generated<string>;
  event_id: string;
  source_bot_id: string;
  origin_channel_id: string;
  origin_thread_id: string | null;
  origin_message_id: string | null;
  /** The Discord message that carried the envelope. */
  handoff_message_id: string;
  text: string;
  received_at: Date;
  expires_at: Date;
  acknowledged_at: Date | null;
}

export type HandoffInboxRow = Selectable<HandoffInboxTable>;
export type NewHandoffInboxRow = Insertable<HandoffInboxTable>;

/**
 * Catch-up progress per channel: every message up to `after_id` was settled by a sweep (taken in,
 * refused, or no handoff), so the next sweep reads after it.
 */
export interface HandoffCatchupTable {
  channel_id: string;
  after_id: string;
  updated_at: Date;
}

/** This part's tables, as it sees the store (the whole schema is src/schema.ts, at the wiring). */
export interface HandoffsDb {
  handoff_events: HandoffEventTable;
  handoff_inbox: HandoffInboxTable;
  handoff_catchup: HandoffCatchupTable;
}
