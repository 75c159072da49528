import { type Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// The identity a delivery is sent as (an operator-named Discord bot, …): the caller's, as the
// operator's policy binds it. Null: the platform's default identity (its own variables), which
// every delivery stored before this had.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('deliveries').addColumn('identity', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('deliveries').dropColumn('identity').execute();
}
