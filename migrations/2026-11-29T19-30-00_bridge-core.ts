import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('destinations')
    .addColumn('guild_id', 'text', (c) => c.notNull())
    .addColumn('destination', 'text', (c) => c.notNull())
    .addColumn('channel_id', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('destinations_pkey', ['guild_id', 'destination'])
    .execute();

  // A delivery row is its own outbox entry: accepted, claimed, sent and recorded in place.
  await db.schema
    .createTable('deliveries')
    .addColumn('request_id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('post', 'dm', 'edit')`))
    // json (not jsonb) keeps the stored key order, which the wire echoes.
    .addColumn('target', 'json', (c) => c.notNull())
    .addColumn('body', 'json', (c) => c.notNull())
    .addColumn('payload_hash', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('pending', 'in_flight', 'delivered', 'failed')`),
    )
    .addColumn('failure_code', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('next_attempt_at', 'timestamptz', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('first_attempt_at', 'timestamptz')
    .addColumn('lease_owner', 'text')
    .addColumn('lease_expires_at', 'timestamptz')
    .addColumn('channel_id', 'text')
    .addColumn('message_id', 'text')
    .addColumn('url', 'text')
    .addColumn('applied', 'boolean')
    .addColumn('last_applied_seq', 'integer')
    .execute();

  await sql`create index deliveries_due on deliveries (next_attempt_at) where status = 'pending'`.execute(db);
  await sql`create index deliveries_leased on deliveries (lease_expires_at) where status = 'in_flight'`.execute(db);
  await db.schema.createIndex('deliveries_created_at').on('deliveries').column('created_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('deliveries').execute();
  await db.schema.dropTable('destinations').execute();
}
