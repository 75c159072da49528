import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Migration } from 'kysely';

// Herald's core migrations are the files of this folder, read from it (nothing to list here): the
// .ts files under tsx and vitest, the compiled .js files (dist/migrations/) once built. A module or
// platform declares its own migrations in its folder (src/modules/contract.ts `migrations`); the
// migrator (src/infra/db/migrate.ts) applies both, ordered by name.

const self = fileURLToPath(import.meta.url);
const extension = path.extname(self);
/** A migration file's name: its timestamp first, so names sort in the order they apply. */
const MIGRATION = /^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}_[a-z0-9-]+$/;

/** Every migration of this folder, by name. */
export async function coreMigrations(): Promise<Record<string, Migration>> {
  const names = readdirSync(path.dirname(self))
    .filter((f) => f.endsWith(extension) && MIGRATION.test(f.slice(0, -extension.length)))
    .map((f) => f.slice(0, -extension.length))
    .sort();
  const loaded = await Promise.all(names.map(async (name) => [name, (await import(pathToFileURL(path.join(path.dirname(self), name + extension)).href)) as Migration] as const));
  return Object.fromEntries(loaded);
}
