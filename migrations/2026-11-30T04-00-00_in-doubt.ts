import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// A delivery remembers when a create may have reached the platform without Herald learning the
// result (a 5xx, a dropped connection, a process killed mid-attempt), across retries and resets:
// `doubt_from`..`doubt_until` bound when that message could have been created, `doubt_channel_id`
// where. Reconciliation and the nonce window are judged against that window, never against an
// attempt counter. `unknown` is stored when Herald cannot tell whether it sent (it is not retried
// until the connector re-POSTs), with an operator-visible `reason`.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('deliveries')
    .addColumn('attempt_started_at', 'timestamptz')
    .addColumn('doubt_from', 'timestamptz')
    .addColumn('doubt_until', 'timestamptz')
    .addColumn('doubt_channel_id', 'text')
    .addColumn('reason', 'text')
    .execute();
  // An attempt in flight before this migration started no later than its first attempt.
  await sql`update deliveries set attempt_started_at = first_attempt_at where status = 'in_flight'`.execute(db);
  // Before this, any undelivered post or DM that had been attempted was treated as possibly sent
  // (reconciled past the nonce window): keep it so, from its first attempt until now.
  await sql`update deliveries set doubt_from = first_attempt_at, doubt_until = now()
    where status in ('pending', 'failed') and kind <> 'edit' and attempts > 0 and first_attempt_at is not null`.execute(db);
  await db.schema.alterTable('deliveries').dropColumn('first_attempt_at').execute();
  await sql`alter table deliveries drop constraint if exists deliveries_status_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_status_check check (status in ('pending', 'in_flight', 'delivered', 'failed', 'unknown'))`.execute(db);
  // Reconciliation looks for other unresolved deliveries that might own a message it finds.
  await sql`create index deliveries_in_doubt on deliveries (doubt_from) where doubt_from is not null`.execute(db);

  // The platform's own word on which message each nonce created: Discord's gateway delivers the
  // bot's MESSAGE_CREATE with the nonce it was sent with. Reconciliation attributes messages by it.
  await db.schema
    .createTable('sent_messages')
    .addColumn('nonce', 'text', (c) => c.primaryKey())
    .addColumn('channel_id', 'text', (c) => c.notNull())
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('sent_messages_message').on('sent_messages').column('message_id').execute();
  await db.schema.createIndex('sent_messages_created_at').on('sent_messages').column('created_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('sent_messages').execute();
  await sql`drop index if exists deliveries_in_doubt`.execute(db);
  await sql`update deliveries set status = 'failed', failure_code = 'UPSTREAM_UNAVAILABLE' where status = 'unknown'`.execute(db);
  await sql`alter table deliveries drop constraint if exists deliveries_status_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_status_check check (status in ('pending', 'in_flight', 'delivered', 'failed'))`.execute(db);
  await db.schema.alterTable('deliveries').addColumn('first_attempt_at', 'timestamptz').execute();
  await sql`update deliveries set first_attempt_at = coalesce(doubt_from, attempt_started_at)`.execute(db);
  await db.schema
    .alterTable('deliveries')
    .dropColumn('attempt_started_at')
    .dropColumn('doubt_from')
    .dropColumn('doubt_until')
    .dropColumn('doubt_channel_id')
    .dropColumn('reason')
    .execute();
}
