import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('registrations')
    .addColumn('user_id', 'text', (c) => c.primaryKey())
    .addColumn('generation', 'text', (c) => c.notNull())
    .addColumn('display_name', 'text', (c) => c.notNull())
    .addColumn('registered_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('registrations_order').on('registrations').columns(['registered_at', 'user_id']).execute();

  // Only a hash of each code is stored; a code dies with its registration.
  await db.schema
    .createTable('pairing_codes')
    .addColumn('code_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('registrations.user_id').onDelete('cascade'))
    .addColumn('generation', 'text', (c) => c.notNull())
    .addColumn('issued_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('pairing_codes_user').on('pairing_codes').columns(['user_id', 'issued_at']).execute();

  // Edits of one message are applied one at a time across processes: a short lease on the original.
  await db.schema
    .alterTable('deliveries')
    .addColumn('edit_lock_owner', 'text')
    .addColumn('edit_lock_expires_at', 'timestamptz')
    .execute();
  await sql`comment on column deliveries.last_applied_seq is 'highest edit seq applied to this original'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('deliveries').dropColumn('edit_lock_owner').dropColumn('edit_lock_expires_at').execute();
  await db.schema.dropTable('pairing_codes').execute();
  await db.schema.dropTable('registrations').execute();
}
