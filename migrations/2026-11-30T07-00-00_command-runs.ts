import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Executions of commands over MCP by idempotency key, so every replica answers a repeat with the
// stored result (or refuses the key reused for another invocation) for a while after it finished.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('command_runs')
    .addColumn('idempotency_key', 'text', (c) => c.primaryKey())
    .addColumn('invocation_hash', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('result', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('command_runs_expires_at').on('command_runs').column('expires_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('command_runs').execute();
}
