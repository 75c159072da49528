import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// A person registers on one platform (Discord, Slack, …): their DMs go there. Null: the home
// platform (HERALD_TRANSPORT), which is where every registration made before this one lives.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('registrations').addColumn('transport', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('registrations').dropColumn('transport').execute();
}
