import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// The archive UI names things and lists what went wrong:
// - media_scrapes.channel_name: the channel's name as the platform gave it when the scrape started
//   (null for scrapes started before, and where the platform gives none).
// - media_items_problems: a scrape's refused and failed items, newest first (its list of errors),
//   found without walking every item of the scrape.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('media_scrapes').addColumn('channel_name', 'text').execute();
  await sql`create index media_items_problems on media_items (scrape_id, posted_at desc, id desc) where state in ('refused', 'failed')`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('media_items_problems').execute();
  await db.schema.alterTable('media_scrapes').dropColumn('channel_name').execute();
}
