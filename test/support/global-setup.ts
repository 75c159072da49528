import { randomBytes } from 'node:crypto';
import { constants, statfsSync } from 'node:fs';
import { access, chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { openStore } from '../../src/infra/db/database.js';
import { migrateToLatest } from '../../src/infra/db/migrate.js';
import { killTrackedProcessGroups, RUN_DIR_VARIABLE } from './run-dir.js';

/**
 * Build one migrated template store, which each test database is then a copy of: with
 * TEST_DATABASE_URL (a real PostgreSQL server) a template database, each test database a cheap
 * `CREATE DATABASE … TEMPLATE` copy; on embedded PGlite a template data folder, each test's folder
 * a file copy of it (a new PGlite folder runs initdb, which costs several seconds of CPU per store).
 */
type Provide = (key: 'templateDatabase' | 'templateDataDir', value: string) => void;

/** One run's folder and template, shared by every project of vitest.config.ts. */
interface SharedRun {
  templateDatabase: string;
  templateDataDir: string;
  teardown: () => Promise<void>;
  users: number;
}
const SHARED = Symbol.for('herald.test.run');

/**
 * vitest runs a global setup once for each project (vitest.config.ts has two) and for the root:
 * the first call makes the run's folder and template, the others use them, and the last teardown
 * removes them.
 */
export default async function setup({ provide }: { provide: Provide }): Promise<() => Promise<void>> {
  const holder = globalThis as { [SHARED]?: Promise<SharedRun> };
  const pending = (holder[SHARED] ??= prepareRun());
  const run = await pending;
  run.users += 1;
  provide('templateDatabase', run.templateDatabase);
  provide('templateDataDir', run.templateDataDir);
  return async () => {
    run.users -= 1;
    if (run.users > 0) return;
    if (holder[SHARED] === pending) delete holder[SHARED];
    await run.teardown();
  };
}

async function prepareRun(): Promise<SharedRun> {
  const cleanRun = await runDirectory();
  const url = process.env['TEST_DATABASE_URL'];
  if (url === undefined || url === '') {
    return { templateDatabase: '', templateDataDir: await pgliteTemplate(), teardown: cleanRun, users: 0 };
  }
  // pid and random: unique even beside runs in another pid namespace on the same server.
  const template = `herald_template_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`drop database if exists ${template}`);
  await admin.query(`create database ${template}`);
  const db = new Kysely({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: withDatabase(url, template), max: 1 }) }) });
  await migrateToLatest(db);
  await db.destroy();
  const teardown = async () => {
    await cleanRun();
    const leftovers = await admin.query<{ datname: string }>(`select datname from pg_database where starts_with(datname, $1) or datname = $2`, [testDatabasePrefix(template), template]);
    for (const row of leftovers.rows) await admin.query(`drop database if exists ${row.datname} with (force)`);
    await admin.end();
  };
  return { templateDatabase: template, templateDataDir: '', teardown, users: 0 };
}

/** A migrated PGlite data folder in this run's folder (removed with it), closed so it can be copied. */
async function pgliteTemplate(): Promise<string> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-template-'));
  const store = await openStore({ databaseUrl: undefined, dataDir });
  try {
    await migrateToLatest(store.db);
  } finally {
    await store.close();
  }
  return dataDir;
}

/**
 * This run's folder (see run-dir.ts): the test workers, forked after this, inherit TMPDIR and
 * make their temp folders inside it. The returned teardown kills any child process a test left
 * running, then removes the folder.
 */
async function runDirectory(): Promise<() => Promise<void>> {
  const dir = await mkdtemp(path.join(await runBase(), 'herald-run-'));
  // Test PostgreSQL clusters run as the postgres user and must reach their folders inside.
  await chmod(dir, 0o755);
  process.env[RUN_DIR_VARIABLE] = dir;
  process.env['TMPDIR'] = dir;
  return async () => {
    const killed = killTrackedProcessGroups(dir);
    if (killed.length > 0) console.warn(`killed ${killed.length} child process group(s) a test left running: ${killed.join(', ')}`);
    await rm(dir, { recursive: true, force: true, maxRetries: 5 });
  };
}

/** The kernel's magic number of a tmpfs (statfs(2)). */
const TMPFS_MAGIC = 0x01021994;
/** Free space /dev/shm needs to hold a run (a container's default of 64 MB does not): 2 GiB. */
const SHM_NEEDED_BYTES = 2 * 1024 ** 3;

/**
 * Where the run's folder goes: the machine's shared-memory tmpfs (/dev/shm) when it has one with
 * room (SHM_NEEDED_BYTES) and TMPDIR names none of its own, else the temp folder. The suite copies, writes and removes some
 * hundreds of 40 MB store folders; in memory that costs no journal, no discard and no writeback.
 */
async function runBase(): Promise<string> {
  const own = process.env['TMPDIR'];
  if (own !== undefined && own !== '') return own;
  try {
    await access('/dev/shm', constants.W_OK);
    const fs = statfsSync('/dev/shm');
    if (fs.type === TMPFS_MAGIC && fs.bavail * fs.bsize >= SHM_NEEDED_BYTES) return '/dev/shm';
  } catch {
    // No /dev/shm here (or not writable): the temp folder.
  }
  return tmpdir();
}

/** The names of one run's test databases start with this (herald_t_<pid>_<random>_), derived from its template's name. */
export function testDatabasePrefix(template: string): string {
  return `herald_t_${template.replace(/^herald_template_/, '')}_`;
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

declare module 'vitest' {
  export interface ProvidedContext {
    templateDatabase: string;
    /** The migrated PGlite data folder test folders copy (empty on PostgreSQL). */
    templateDataDir: string;
  }
}
