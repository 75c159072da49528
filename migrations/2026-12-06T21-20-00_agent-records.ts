import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// What `herald mcp` remembers of each caller's sends (the connector, or an OAuth client), kept here
// rather than in a file of its own, so replicas of `herald mcp` on different hosts share it: the
// posts and DMs it sent with their last edit seq, the seq each edit id took, and the request_ids an
// OAuth client claimed before sending. Kept 8 days, like the deliveries they name.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('agent_messages')
    .addColumn('principal', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('sent_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('agent_messages_pk', ['principal', 'request_id'])
    .execute();
  await db.schema.createIndex('agent_messages_sent_at').on('agent_messages').column('sent_at').execute();
  await db.schema
    .createTable('agent_message_edits')
    .addColumn('principal', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('edit_id', 'text', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('agent_message_edits_pk', ['principal', 'request_id', 'edit_id'])
    .execute();
  await db.schema.createIndex('agent_message_edits_at').on('agent_message_edits').column('at').execute();
  await db.schema
    .createTable('agent_claims')
    .addColumn('principal', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('claimed_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('agent_claims_pk', ['principal', 'request_id'])
    .execute();
  await db.schema.createIndex('agent_claims_claimed_at').on('agent_claims').column('claimed_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('agent_claims').execute();
  await db.schema.dropTable('agent_message_edits').execute();
  await db.schema.dropTable('agent_messages').execute();
}
