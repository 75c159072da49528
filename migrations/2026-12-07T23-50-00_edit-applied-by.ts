import { type Kysely, sql } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Which edit (its request id) recorded an original's last applied seq. An attempt of that edit that
// finds its own seq recorded knows an earlier attempt of it applied it (the earlier attempt stalled
// or died before its outcome was written), and reports it applied without a second platform call.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('deliveries').addColumn('last_applied_by', 'text').execute();
  await sql`comment on column deliveries.last_applied_by is 'the edit whose seq last_applied_seq records'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('deliveries').dropColumn('last_applied_by').execute();
}
