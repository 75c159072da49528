import type { Kysely } from 'kysely';

// Frozen in time: this migration imports nothing from the app.
//
// The archive's action log is pruned by age (hourly, past Herald's record retention): an index on
// its time, so the prune reads only what it deletes.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('archive_actions_at').on('archive_actions').column('at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('archive_actions_at').execute();
}
