import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// Addresses name their transport: a destination maps to a channel on a named platform, and a
// delivery remembers which platform its message went to (edits and reconciliation go there).
// Everything before this was Discord.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('destinations').addColumn('transport', 'text', (c) => c.notNull().defaultTo('discord')).execute();
  await db.schema.alterTable('deliveries').addColumn('transport', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('deliveries').dropColumn('transport').execute();
  await db.schema.alterTable('destinations').dropColumn('transport').execute();
}
