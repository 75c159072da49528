import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// What must be held by one process at a time (Discord's gateway session, the IRC observer) is held
// under a lease: one row per name, the holder's id and when its lease runs out. A holder renews it;
// another process takes it over once it has expired.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('singleton_leases')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('holder', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('acquired_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('singleton_leases').execute();
}
