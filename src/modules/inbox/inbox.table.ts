import type { Generated, Insertable, Selectable } from 'kysely';

/** One heard event: stored once per `event_id`; its bigserial id is the inbox's cursor. */
export interface InboxEventTable {
  /** bigserial, read back as a string (pg's int8). */
  id: Generated<string>;
  /** `<platform>:<message id>` (a reaction adds `:reaction:<user>:<emoji>`). */
  event_id: string;
  kind: 'mention' | 'dm' | 'reply' | 'message' | 'reaction' | 'handoff';
  platform: string;
  channel_id: string;
  guild_id: string | null;
  thread_id: string | null;
  message_id: string;
  author_id: string;
  author_name: string | null;
  author_bot: boolean;
  reply_to: string | null;
  content: string;
  reaction: string | null;
  /** JSON array of attachment metadata. */
  attachments: string;
  /** JSON of a handoff's envelope facts (kind handoff). */
  handoff: string | null;
  /** Where it was taken from (a handoff's id in the handoff inbox). */
  source_ref: string | null;
  created_at: Date;
  received_at: Date;
  /**
   * The bot that heard it (src/infra/policy/identity.ts): a DM is the bot's it was written to, and
   * only an agent speaking as that bot reads it; every other event is the default bot's.
   */
  identity: string;
}

/** The connector's acknowledged cursor. */
export interface InboxCursorTable {
  name: string;
  after_id: string;
  updated_at: Date;
}

/** Catch-up progress per listened channel. */
export interface InboxCatchupTable {
  channel_id: string;
  after_id: string;
  updated_at: Date;
}

/** One webhook push per event: its own outbox row. */
export interface InboxPushTable {
  /** The event's inbox id. */
  id: string;
  kind: string;
  status: 'pending' | 'done' | 'failed';
  attempts: Generated<number>;
  next_attempt_at: Date;
  lease_owner: string | null;
  lease_token: string | null;
  lease_expires_at: Date | null;
  /** For operators: the last failure (status and a short reason; never the body). */
  last_error: string | null;
  created_at: Date;
}

export type InboxEventRow = Selectable<InboxEventTable>;
export type NewInboxEventRow = Insertable<InboxEventTable>;
export type InboxPushRow = Selectable<InboxPushTable>;

/** This part's tables, as it sees the store (the whole schema is src/schema.ts, at the wiring). */
export interface InboxDb {
  inbox_events: InboxEventTable;
  inbox_cursors: InboxCursorTable;
  inbox_catchup: InboxCatchupTable;
  inbox_pushes: InboxPushTable;
}
