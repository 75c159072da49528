import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// The inbound inbox:
// - inbox_events: what the agent heard, once per event_id (`<platform>:<message id>`), its bigserial
//   id the cursor; content and attachment metadata as the platform gave them.
// - inbox_cursors: the connector's acknowledged cursor.
// - inbox_catchup: per listened channel, the message up to which a catch-up sweep settled history.
// - inbox_pushes: one webhook push per event, its own outbox row (leased, retried, given up).
// - destinations.listen / listen_since: the operator's opt-in of a destination's channel.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('inbox_events')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('event_id', 'text', (c) => c.notNull().unique())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('platform', 'text', (c) => c.notNull())
    .addColumn('channel_id', 'text', (c) => c.notNull())
    .addColumn('guild_id', 'text')
    .addColumn('thread_id', 'text')
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('author_id', 'text', (c) => c.notNull())
    .addColumn('author_name', 'text')
    .addColumn('author_bot', 'boolean', (c) => c.notNull())
    .addColumn('reply_to', 'text')
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('reaction', 'text')
    .addColumn('attachments', 'text', (c) => c.notNull())
    .addColumn('handoff', 'text')
    .addColumn('source_ref', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('received_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await sql`create index inbox_events_channel on inbox_events (channel_id, id)`.execute(db);
  await sql`create index inbox_events_dm_author on inbox_events (author_id) where kind = 'dm'`.execute(db);
  await sql`create index inbox_events_received on inbox_events (received_at)`.execute(db);
  await db.schema
    .createTable('inbox_cursors')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('after_id', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('inbox_catchup')
    .addColumn('channel_id', 'text', (c) => c.primaryKey())
    .addColumn('after_id', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('inbox_pushes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'timestamptz', (c) => c.notNull())
    .addColumn('lease_owner', 'text')
    .addColumn('lease_expires_at', 'timestamptz')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await sql`create index inbox_pushes_due on inbox_pushes (next_attempt_at) where status = 'pending'`.execute(db);
  await db.schema.alterTable('destinations').addColumn('listen', 'boolean', (c) => c.notNull().defaultTo(false)).execute();
  await db.schema.alterTable('destinations').addColumn('listen_since', 'timestamptz').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('destinations').dropColumn('listen_since').execute();
  await db.schema.alterTable('destinations').dropColumn('listen').execute();
  await db.schema.dropTable('inbox_pushes').execute();
  await db.schema.dropTable('inbox_catchup').execute();
  await db.schema.dropTable('inbox_cursors').execute();
  await db.schema.dropTable('inbox_events').execute();
}
