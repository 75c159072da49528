import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// A platform's request budget shared by every process sending with one bot (Discord's global limit
// is per bot, not per process): the time the next request may start, advanced by each request.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('rate_budgets')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('next_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('rate_budgets').execute();
}
