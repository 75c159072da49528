import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import { openStore, type Store } from '../../src/infra/db/database.js';
import { migrateToLatest } from '../../src/infra/db/migrate.js';
import type { Database } from '../../src/schema.js';
import { testDatabasePrefix, withDatabase } from './global-setup.js';

/**
 * Copy a folder as `cp -r` does. A PGlite data folder is some 1,200 small files: Node's recursive
 * `fs.cp` spent about 0.4 CPU-s of the test worker on each copy, coreutils' cp about 0.05 s, and
 * the suite copies the template for every store it opens.
 */
function copyFolder(from: string, to: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('cp', ['-r', '--', from, to], (err, _stdout, stderr) => (err === null ? resolve() : reject(new Error(`cp -r ${from} ${to}: ${stderr || err.message}`))));
  });
}

export interface TestDatabase {
  /** Set on PostgreSQL; undefined means embedded PGlite in `dataDir`. */
  databaseUrl: string | undefined;
  dataDir: string;
  drop(): Promise<void>;
}

export const onPostgres = (process.env['TEST_DATABASE_URL'] ?? '') !== '';

/**
 * A fresh, migrated, empty database: a copy of the run's template (global-setup.ts), a database on
 * PostgreSQL, a data folder on PGlite.
 */
export async function testDatabase(): Promise<TestDatabase> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-test-'));
  const removeDir = () => rm(dataDir, { recursive: true, force: true });
  const url = process.env['TEST_DATABASE_URL'];
  if (url === undefined || url === '') {
    // The folder PGlite opens (src/infra/db/database.ts), already migrated: no initdb, no migrations.
    await copyFolder(path.join(inject('templateDataDir'), 'pglite'), path.join(dataDir, 'pglite')).catch(async (err: unknown) => {
      await removeDir();
      throw err;
    });
    return { databaseUrl: undefined, dataDir, drop: removeDir };
  }
  // Named after this run (its template's pid), so its teardown drops its own databases only, not
  // those of another run on the same server.
  const name = `${testDatabasePrefix(inject('templateDatabase'))}${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    // Two copies of one template at the same instant collide ("being accessed by other users"): retry.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`create database ${name} template ${inject('templateDatabase')}`);
        break;
      } catch (err) {
        if (attempt >= 20 || !String(err).includes('being accessed by other users')) throw err;
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
      }
    }
  } finally {
    await admin.end();
  }
  return {
    databaseUrl: withDatabase(url, name),
    dataDir,
    async drop() {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`).finally(() => c.end());
      await removeDir();
    },
  };
}

/** A test database with a store open on it, migrated to the latest schema. */
export interface MigratedStore {
  db: TestDatabase;
  store: Store<Database>;
  /** Close the store, then drop the database (and its data folder). */
  close(): Promise<void>;
}

/** Open a store on `db` and migrate it; the store is closed again if the migration fails. */
export async function openMigratedStore(db: TestDatabase): Promise<Store<Database>> {
  const store = await openStore<Database>({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
  try {
    await migrateToLatest(store.db);
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}

/** A fresh database with a migrated store on it; nothing is left behind if opening fails halfway. */
export async function migratedStore(): Promise<MigratedStore> {
  const db = await testDatabase();
  let store: Store<Database>;
  try {
    store = await openMigratedStore(db);
  } catch (err) {
    await db.drop();
    throw err;
  }
  return {
    db,
    store,
    async close() {
      try {
        await store.close();
      } finally {
        await db.drop();
      }
    },
  };
}

/**
 * Several "processes" on one migrated database: three stores on PostgreSQL, one on PGlite (which has
 * one process). The first is the fixture's own; `close` closes the others, then the fixture.
 */
export async function storesOnOneDatabase(): Promise<{ fixture: MigratedStore; stores: Store[]; close(): Promise<void> }> {
  const fixture = await migratedStore();
  const { db } = fixture;
  const stores: Store[] = [fixture.store as Store];
  const n = db.databaseUrl === undefined ? 1 : 3;
  try {
    for (let i = 1; i < n; i++) stores.push(await openStore({ databaseUrl: db.databaseUrl, dataDir: db.dataDir }));
  } catch (err) {
    for (const s of stores.slice(1)) await s.close();
    await fixture.close();
    throw err;
  }
  return {
    fixture,
    stores,
    async close() {
      for (const s of stores.slice(1)) await s.close();
      await fixture.close();
    },
  };
}
