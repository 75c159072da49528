import { type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// The bot an inbox event was heard by (an identity: an operator-named Discord bot, or `default`,
// the platform's own variables'). A DM is heard by the bot it was written to, and only an agent
// speaking as that bot reads it; what is heard in channels stays the default bot's, for every agent
// the policy lets read it. Every event stored before this was heard by the default bot.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('inbox_events').addColumn('identity', 'text', (c) => c.notNull().defaultTo('default')).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  // Only the default bot's DMs fit the old shape (where every agent read every DM).
  await db.deleteFrom('inbox_events').where('identity', '<>', 'default').execute();
  await db.schema.alterTable('inbox_events').dropColumn('identity').execute();
}
