import { type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Who uploaded which stored file, for the operator's per-caller upload cap (policy rule
// `files.max_total_bytes`): a caller's total is the size of the files it uploaded that the store
// still holds (a pruned file no longer counts; the same bytes uploaded twice count once).
// - subject: `connector`, or `client:<OAuth client id>`
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('file_uploads')
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('file_uploads_pkey', ['subject', 'sha256'])
    .execute();
  await db.schema.createIndex('file_uploads_by_file').on('file_uploads').column('sha256').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('file_uploads').execute();
}
