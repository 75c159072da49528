import { type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// The operator's policy can ask for a second, confirming call (rule `confirm`): the first call
// answers a one-use token (an HMAC that carries its caller, operation or tool, arguments' hash and
// expiry); its use is a row here, in the shared store, so a token is used once across replicas.
// - token_id: the token's own random part
// - key: the confirmed call's retry key (its request_id), so a retry of that same call still passes
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('policy_confirmations')
    .addColumn('token_id', 'text', (c) => c.primaryKey())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('policy_confirmations_by_time').on('policy_confirmations').column('at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('policy_confirmations').execute();
}
