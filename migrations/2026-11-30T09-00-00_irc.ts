import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// IRC beside Discord. `irc_lines`: what the observer connection read in its channels (IRC keeps no
// history a client can fetch later), so reading survives a restart and replicas share it; a msgid
// is stored once however many observers (or history replays) saw it. `irc_channels`: channels
// created through Herald, joined again by every observer after a restart. `chat_sends`: the chat
// tools' sends, each its own outbox entry, like deliveries.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('irc_lines')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('nick', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addColumn('msgid', 'text')
    .addColumn('delivery_tag', 'text')
    .execute();
  await db.schema.createIndex('irc_lines_msgid').on('irc_lines').column('msgid').unique().execute();
  await db.schema.createIndex('irc_lines_channel_at').on('irc_lines').columns(['channel', 'at']).execute();
  await db.schema.createIndex('irc_lines_delivery_tag').on('irc_lines').column('delivery_tag').execute();

  await db.schema
    .createTable('irc_channels')
    .addColumn('channel', 'text', (c) => c.primaryKey())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();

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
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('chat_sends').execute();
  await db.schema.dropTable('irc_channels').execute();
  await db.schema.dropTable('irc_lines').execute();
}
