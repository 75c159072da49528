import type { Migration } from 'kysely';
import { describe, expect, it } from 'vitest';
import { allMigrations } from '../src/infra/db/migrate.js';
import { StartupError } from '../src/infra/startup.js';

// The migrator's list is migrations/'s files (read from the folder) and the modules' declared ones.
// A file there named like a migration that exports nothing (a stray copy, a half-written one) is
// met the same way as a declared migration without `up`: start-up stops naming it, before any
// migration applies, instead of Kysely's bare "migration.up is not a function" in the middle.

const up: Migration = { up: async () => undefined };

describe('the migrations list', () => {
  it('a migration without an up function stops start-up, naming it', async () => {
    const err = await allMigrations({ '2099-01-01T00-00-00_stray': {} as Migration, '2099-01-01T00-00-01_fine': up }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StartupError);
    expect((err as Error).message).toBe('the migration(s) 2099-01-01T00-00-00_stray export no up function: a migration file exports up (and down), anything else stays out of migrations/');
  });

  it('a declared name that is also a name of every object (constructor) is no clash', async () => {
    const all = await allMigrations({ constructor: up, toString: up });
    expect(Object.hasOwn(all, 'constructor') && Object.hasOwn(all, 'toString')).toBe(true);
  });

  it('a name migrations/ has is still refused as declared twice', async () => {
    await expect(allMigrations({ '2026-11-29T19-30-00_bridge-core': up })).rejects.toThrow('the migration 2026-11-29T19-30-00_bridge-core is declared twice: rename one');
  });
});
