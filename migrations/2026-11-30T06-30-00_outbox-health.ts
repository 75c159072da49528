import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Metrics count deliveries stored `unknown` (waiting for the connector to re-POST) at every scrape:
// a partial index keeps that a read of those few rows, never a scan of the delivered history.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index if not exists deliveries_unknown on deliveries (kind) where status = 'unknown'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists deliveries_unknown`.execute(db);
}
