import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Twins (deliveries of the same content to the same target) take turns: a claim passes over a due
// delivery while a twin of it is in flight, pending ahead of it, or in doubt too recently to be told
// apart (src/modules/deliveries/delivery.repository.ts, `claimDue`). Each of the three is looked up
// by a hash of the target and the body, in an index of its own over the few rows it concerns, so
// that a claim proves "no twin holds this row back" with three short index probes: the pending ones
// by their hash and age (only an older one holds a row back), those in flight, and those in doubt.
// Delivered and failed rows, the bulk of the table, are in none of them.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index deliveries_twins_pending on deliveries (md5(target::text || body::text), created_at, request_id) where status = 'pending'`.execute(db);
  await sql`create index deliveries_twins_in_flight on deliveries (md5(target::text || body::text)) where status = 'in_flight'`.execute(db);
  await sql`create index deliveries_twins_in_doubt on deliveries (md5(target::text || body::text)) where doubt_until is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists deliveries_twins_pending`.execute(db);
  await sql`drop index if exists deliveries_twins_in_flight`.execute(db);
  await sql`drop index if exists deliveries_twins_in_doubt`.execute(db);
}
