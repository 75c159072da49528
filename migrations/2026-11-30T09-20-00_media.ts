import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// The media archive: scrapes (each row is its own outbox job, walking one channel's history a page
// per step from a stored cursor), the media items they index, the files stored by content
// (SHA-256), and the action log of every archive call.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('media_scrapes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('channel_id', 'text', (c) => c.notNull())
    .addColumn('guild_id', 'text')
    .addColumn('mode', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('pause_reason', 'text')
    .addColumn('cursor', 'text')
    .addColumn('messages_seen', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('items_found', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('bytes', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('errors', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_error', 'text')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_step_at', 'timestamptz', (c) => c.notNull())
    .addColumn('lease_owner', 'text')
    .addColumn('lease_expires_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addColumn('finished_at', 'timestamptz')
    .execute();
  // One active scrape per channel, enforced by the database (two replicas cannot both start one).
  await sql`create unique index media_scrapes_one_running on media_scrapes (channel_id) where state = 'running'`.execute(db);
  await sql`create index media_scrapes_due on media_scrapes (next_step_at) where state = 'running'`.execute(db);

  await db.schema
    .createTable('media_blobs')
    .addColumn('sha256', 'text', (c) => c.primaryKey())
    .addColumn('size_bytes', 'bigint', (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('media_items')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('scrape_id', 'text', (c) => c.notNull().references('media_scrapes.id').onDelete('cascade'))
    .addColumn('channel_id', 'text', (c) => c.notNull())
    .addColumn('guild_id', 'text')
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('author_id', 'text', (c) => c.notNull())
    .addColumn('author_name', 'text')
    .addColumn('posted_at', 'timestamptz', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    // Which attachment, embed part or link of the message: with the message, an item's identity.
    .addColumn('source_key', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('filename', 'text')
    .addColumn('content_type', 'text')
    .addColumn('size_bytes', 'bigint')
    .addColumn('sha256', 'text', (c) => c.references('media_blobs.sha256'))
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('content', 'text', (c) => c.notNull())
    .execute();
  // A page processed twice (a restart mid-step) inserts nothing twice.
  await sql`create unique index media_items_identity on media_items (scrape_id, message_id, source_key)`.execute(db);
  // Keyset pagination, newest first, alone and under each equality filter.
  await sql`create index media_items_order on media_items (posted_at desc, id desc)`.execute(db);
  for (const column of ['scrape_id', 'channel_id', 'guild_id', 'author_id', 'kind', 'source']) {
    await sql`create index ${sql.raw(`media_items_${column}_order`)} on media_items (${sql.ref(column)}, posted_at desc, id desc)`.execute(db);
  }
  // The text filter: words of the message, case-folded, without an extension (PGlite has the same).
  await sql`create index media_items_words on media_items using gin (to_tsvector('simple', content))`.execute(db);
  await sql`create index media_items_sha256 on media_items (sha256) where sha256 is not null`.execute(db);
  await sql`create index media_items_url on media_items (url)`.execute(db);

  await db.schema
    .createTable('archive_actions')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('via', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('target', 'text')
    .addColumn('result', 'text', (c) => c.notNull())
    .addColumn('detail', 'text')
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('archive_actions').execute();
  await db.schema.dropTable('media_items').execute();
  await db.schema.dropTable('media_blobs').execute();
  await db.schema.dropTable('media_scrapes').execute();
}
