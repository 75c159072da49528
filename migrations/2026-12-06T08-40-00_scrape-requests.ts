import { type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// The request_id a start of a media scrape was given (POST /admin/archive/scrapes, MCP
// scrape_media): the same one again answers the scrape it started or resumed (`existing: true`),
// starting nothing. Written in the transaction that starts or resumes the scrape; gone with it.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('media_scrape_requests')
    .addColumn('request_id', 'text', (c) => c.primaryKey())
    .addColumn('scrape_id', 'text', (c) => c.notNull().references('media_scrapes.id').onDelete('cascade'))
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('media_scrape_requests_by_scrape').on('media_scrape_requests').column('scrape_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('media_scrape_requests').execute();
}
