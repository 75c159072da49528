import { type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// The operator's policy (HERALD_POLICY) caps calls per tool per minute and per day: each counted
// call is a row here, in the shared store, so every replica counts against the same cap.
// - subject: `connector`, or `client:<OAuth client id>`
// - key: the call's request_id (or idempotencyKey) when it has one, so a retry of the same request
//   is one call; else a random key
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('policy_usage')
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('tool', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('policy_usage_pkey', ['subject', 'tool', 'key'])
    .execute();
  await db.schema.createIndex('policy_usage_by_time').on('policy_usage').columns(['subject', 'tool', 'at']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('policy_usage').execute();
}
