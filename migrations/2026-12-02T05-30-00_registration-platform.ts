import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// A person registers on one platform (Discord, Slack, …): their DMs go there. Registrations made
// before this one have none (null): they are the home platform's (HERALD_TRANSPORT).
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('registrations').addColumn('transport', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('registrations').dropColumn('transport').execute();
}
