import { type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Each claim of a leased row writes a token of its own (src/outbox/leased-table.ts), and an outcome
// is written only under the token of the claim that holds the row: a process that stalled past its
// lease (a later claim wrote another token) changes nothing, even when it is the same worker that
// claimed the row again. Null: no claim holds the row.
const TABLES = ['deliveries', 'inbox_pushes', 'media_scrapes'];

export async function up(db: Kysely<any>): Promise<void> {
  for (const table of TABLES) await db.schema.alterTable(table).addColumn('lease_token', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of TABLES) await db.schema.alterTable(table).dropColumn('lease_token').execute();
}
