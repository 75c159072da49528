import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// A chat send (the chat tools' send_message) becomes a row of the one outbox, kind `chat`, under
// request_id `chat:<id>` (chat ids keep their own namespace). Its target is {transport, channel,
// sender}, its body {content: text}; the platform's message ids (one per line) are kept in the new
// `message_ids` column, a JSON array. `unconfirmed`: written, but the platform gave no proof.
// Existing chat_sends rows are copied over, then chat_sends is dropped.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table deliveries drop constraint if exists deliveries_kind_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_kind_check check (kind in ('post', 'dm', 'edit', 'reply', 'handoff', 'chat'))`.execute(db);
  await sql`alter table deliveries drop constraint if exists deliveries_status_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_status_check check (status in ('pending', 'in_flight', 'delivered', 'failed', 'unknown', 'unconfirmed'))`.execute(db);
  await db.schema.alterTable('deliveries').addColumn('message_ids', 'text').execute();

  const rows = (await sql`select * from chat_sends`.execute(db)).rows as Record<string, any>[];
  for (const r of rows) {
    const target = { transport: r['transport'], channel: r['channel'], sender: r['sender'] };
    const body = { content: r['text'] };
    // The same hash the chat module stores (payloadHash of kind, target, body).
    const hash = createHash('sha256').update(JSON.stringify(['chat', target, body])).digest('hex');
    await db
      .insertInto('deliveries')
      .values({
        request_id: `chat:${r['id']}`,
        kind: 'chat',
        target: JSON.stringify(target),
        body: JSON.stringify(body),
        payload_hash: hash,
        status: r['status'],
        failure_code: r['status'] === 'failed' ? 'UPSTREAM_UNAVAILABLE' : null,
        reason: r['reason'],
        message_ids: r['message_ids'],
        attempts: r['attempts'],
        created_at: r['created_at'],
        next_attempt_at: r['next_attempt_at'],
        lease_owner: r['lease_owner'],
        lease_expires_at: r['lease_expires_at'],
        transport: r['transport'],
        channel_id: r['channel'],
      })
      .onConflict((oc) => oc.column('request_id').doNothing())
      .execute();
  }
  await db.schema.dropTable('chat_sends').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('chat_sends')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('transport', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('sender', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('message_ids', 'text')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('next_attempt_at', 'timestamptz', (c) => c.notNull())
    .addColumn('lease_owner', 'text')
    .addColumn('lease_expires_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('chat_sends_due').on('chat_sends').columns(['status', 'next_attempt_at']).execute();
  await sql`insert into chat_sends (id, transport, channel, sender, text, status, reason, message_ids, attempts, created_at, next_attempt_at, lease_owner, lease_expires_at)
    select substr(request_id, 6), target->>'transport', target->>'channel', target->>'sender', body->>'content', status, reason, message_ids, attempts, created_at, next_attempt_at, lease_owner, lease_expires_at
      from deliveries where kind = 'chat'`.execute(db);
  await sql`delete from deliveries where kind = 'chat'`.execute(db);
  await db.schema.alterTable('deliveries').dropColumn('message_ids').execute();
  await sql`alter table deliveries drop constraint if exists deliveries_status_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_status_check check (status in ('pending', 'in_flight', 'delivered', 'failed', 'unknown'))`.execute(db);
  await sql`alter table deliveries drop constraint if exists deliveries_kind_check`.execute(db);
  await sql`alter table deliveries add constraint deliveries_kind_check check (kind in ('post', 'dm', 'edit', 'reply', 'handoff'))`.execute(db);
}
