import { type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Handoffs' catch-up from channel history:
// - handoff_catchup: per channel, the newest message up to which every message was settled by a
//   sweep (taken in, refused, or no handoff), so the next sweep reads only what is newer.
// - handoff_events.message_id: the message that carried the event, so the same message seen again
//   (by a sweep, or a retry after a lost answer) is told apart from another message replaying it.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('handoff_catchup')
    .addColumn('channel_id', 'text', (c) => c.primaryKey())
    .addColumn('after_id', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.alterTable('handoff_events').addColumn('message_id', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('handoff_events').dropColumn('message_id').execute();
  await db.schema.dropTable('handoff_catchup').execute();
}
