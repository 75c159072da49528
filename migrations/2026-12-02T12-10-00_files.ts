import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Files out and in (issue 25): a store of files by the SHA-256 of their bytes (uploads an agent
// attaches to deliveries, and attachments Herald fetched for it), and which platform attachment
// each fetched file came from, so one attachment is fetched once.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('files')
    .addColumn('sha256', 'text', (c) => c.primaryKey())
    .addColumn('size_bytes', 'bigint', (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('filename', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    // Last uploaded, attached or fetched: an unreferenced file expires a while after it.
    .addColumn('used_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('files_used_at').on('files').column('used_at').execute();
  await db.schema
    .createTable('attachment_downloads')
    .addColumn('transport', 'text', (c) => c.notNull())
    .addColumn('channel_id', 'text', (c) => c.notNull())
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('attachment_id', 'text', (c) => c.notNull())
    .addColumn('sha256', 'text', (c) => c.notNull().references('files.sha256').onDelete('cascade'))
    .addColumn('filename', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('attachment_downloads_pk', ['transport', 'channel_id', 'message_id', 'attachment_id'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('attachment_downloads').execute();
  await db.schema.dropTable('files').execute();
}
