import { Migrator, type Kysely, type MigrationResultSet } from 'kysely';
import { migrations } from '../../migrations/index.js';

/** Apply every migration in `migrations/` not applied yet. Safe to run from several processes at once. */
export async function migrateToLatest<DB>(db: Kysely<DB>): Promise<MigrationResultSet> {
  // Imported statically (not read from the folder at run time) so they load the same under tsx and vitest.
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const result = await migrator.migrateToLatest();
  if (result.error !== undefined) {
    throw result.error instanceof Error ? result.error : new Error(String(result.error));
  }
  return result;
}
