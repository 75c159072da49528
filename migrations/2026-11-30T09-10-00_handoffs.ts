import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Bot-to-bot handoffs, in the shared database so every replica agrees:
// - handoff_events: each envelope event_id this bot accepted for checking (the replay record),
//   kept until the envelope expires, with what became of it (accepted, or refused by the rate limit).
// - handoff_inbox: accepted handoffs waiting for the agent, until it acknowledges them.
// - deliveries may now be of kind `handoff`: a sent handoff is a delivery (same outbox, nonce and
//   in-doubt reconciliation), under a request_id derived from the handoff's own.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('handoff_events')
    .addColumn('event_id', 'text', (c) => c.primaryKey())
    .addColumn('source_bot_id', 'text', (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull().check(sql`outcome in ('accepted', 'rate_limited')`))
    .addColumn('received_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('handoff_events_expires_at').on('handoff_events').column('expires_at').execute();
  await db.schema.createIndex('handoff_events_source').on('handoff_events').columns(['source_bot_id', 'received_at']).execute();
  await db.schema
    .createTable('handoff_inbox')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('event_id', 'text', (c) => c.notNull().unique())
    .addColumn('source_bot_id', 'text', (c) => c.notNull())
    .addColumn('origin_channel_id', 'text', (c) => c.notNull())
    .addColumn('origin_thread_id', 'text')
    .addColumn('origin_message_id', 'text')
    .addColumn('handoff_message_id', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('received_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('acknowledged_at', 'timestamptz')
    .execute();
  await sql`create index handoff_inbox_unacknowledged on handoff_inbox (id) where acknowledged_at is null`.execute(db);
  await sql`alter table deliveries drop constraint if exists deliveries_kind_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_kind_check check (kind in ('post', 'dm', 'edit', 'reply', 'handoff'))`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`delete from deliveries where kind = 'handoff'`.execute(db);
  await sql`alter table deliveries drop constraint if exists deliveries_kind_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_kind_check check (kind in ('post', 'dm', 'edit', 'reply'))`.execute(db);
  await db.schema.dropTable('handoff_inbox').execute();
  await db.schema.dropTable('handoff_events').execute();
}
