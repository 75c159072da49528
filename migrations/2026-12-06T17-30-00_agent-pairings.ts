import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// An agent's pairing is one fact, kept here: whom each caller (the connector, or an OAuth client of
// `herald mcp`) is paired with, set by redeeming a pairing code however it was redeemed (over HTTP,
// or by `herald mcp`'s `pair` tool), read by every way in.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('agent_pairings')
    .addColumn('principal', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('generation', 'text', (c) => c.notNull())
    .addColumn('paired_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('agent_pairings').execute();
}
