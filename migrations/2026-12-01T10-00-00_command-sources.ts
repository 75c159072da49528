import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// A user's message is consent to one command run on their behalf over MCP: the first execute that
// names it claims it here, and the primary key refuses every other claim, across processes.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('command_sources')
    .addColumn('source_message_id', 'text', (c) => c.primaryKey())
    .addColumn('idempotency_key', 'text', (c) => c.notNull())
    .addColumn('claimed_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('command_sources_expires_at').on('command_sources').column('expires_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('command_sources').execute();
}
