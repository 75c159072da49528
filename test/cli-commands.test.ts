import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { onPostgres } from './support/db.js';
import { testDatabasePrefix, withDatabase } from './support/global-setup.js';
import { runHerald } from './support/process.js';

/**
 * `herald migrate` and `herald commands register` as an operator runs them: the CLI in a child
 * process, on an empty store and against the sandbox Discord, judged by exit code, output and
 * what the store and Discord hold afterwards.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
/** Any line of a stack trace: an operator is told what happened, not shown where in the code. */
const STACK_LINE = /^\s+at .+\(.*:\d+:\d+\)$/m;

/** What migrate applies on an empty store: every migration file of the repository, in name order. */
async function migrationNames(): Promise<string[]> {
  const files = await readdir(path.join(ROOT, 'migrations'));
  return files.filter((f) => f.endsWith('.ts') && f !== 'index.ts').map((f) => f.slice(0, -3)).sort();
}

/** An empty store, never migrated: a new PGlite folder, or a new empty database on PostgreSQL (named so the run's teardown drops it if this file cannot). */
async function emptyStore(): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-cli-'));
  const removeDir = () => rm(dataDir, { recursive: true, force: true });
  const url = process.env['TEST_DATABASE_URL'] ?? '';
  if (!onPostgres) return { env: { HERALD_DATA_DIR: dataDir }, drop: removeDir };
  const name = `${testDatabasePrefix(inject('templateDatabase'))}cli_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`create database ${name}`).finally(() => admin.end());
  return {
    env: { HERALD_DATA_DIR: dataDir, DATABASE_URL: withDatabase(url, name) },
    async drop() {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`).finally(() => c.end());
      await removeDir();
    },
  };
}

describe('herald migrate', { timeout: 120_000 }, () => {
  const stores: { drop(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.drop()));
  });

  it('applies every migration to an empty store and says which, then says it is up to date', async () => {
    const store = await emptyStore();
    stores.push(store);
    const first = runHerald(['migrate'], store.env);
    expect((await first.exited).code, first.output()).toBe(0);
    const applied = first.output().split('\n').find((l) => l.startsWith('applied: '));
    expect(applied, first.output()).toBe(`applied: ${(await migrationNames()).join(', ')}`);
    expect(first.output()).not.toMatch(STACK_LINE);

    const again = runHerald(['migrate'], store.env);
    expect((await again.exited).code, again.output()).toBe(0);
    expect(again.output().split('\n')).toContain('already up to date');
    expect(again.output()).not.toContain('applied: ');
  });

  // PGlite is one process's store: two processes on one folder are refused by design.
  it.skipIf(!onPostgres)('is safe to run from two processes at once: both succeed, and each migration is applied once', async () => {
    const store = await emptyStore();
    stores.push(store);
    const runs = [runHerald(['migrate'], store.env), runHerald(['migrate'], store.env)];
    const codes = await Promise.all(runs.map(async (r) => (await r.exited).code));
    expect(codes, runs.map((r) => r.output()).join('\n---\n')).toEqual([0, 0]);
    const applied = runs.flatMap((r) => r.output().split('\n').filter((l) => l.startsWith('applied: ')).flatMap((l) => l.slice('applied: '.length).split(', ')));
    expect(applied.sort()).toEqual(await migrationNames());
  });
});

describe('herald commands register', { timeout: 120_000 }, () => {
  let sandbox: DiscordSandbox;
  let dataDir: string;
  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
    dataDir = await mkdtemp(path.join(tmpdir(), 'herald-cli-'));
  });
  afterAll(async () => {
    await sandbox?.close();
    if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
  });

  const register = () => runHerald(['commands', 'register'], { DISCORD_TOKEN: sandbox.botToken, DISCORD_API_URL: sandbox.apiUrl, HERALD_DATA_DIR: dataDir });

  it("registers Herald's slash commands with Discord and names them; again, it replaces them rather than adding more", async () => {
    expect(sandbox.commands).toEqual([]);
    const first = register();
    expect((await first.exited).code, first.output()).toBe(0);
    expect(first.output().split('\n'), first.output()).toContain('registered: /agent, /destinations, /media');
    expect(sandbox.commands.map((c) => c.name).sort()).toEqual(['agent', 'destinations', 'media']);
    const destinations = sandbox.commands.find((c) => c.name === 'destinations');
    expect(destinations?.options?.map((o) => o.name).sort()).toEqual(['clear', 'list', 'set']);

    const again = register();
    expect((await again.exited).code, again.output()).toBe(0);
    expect(sandbox.commands.map((c) => c.name).sort()).toEqual(['agent', 'destinations', 'media']);
    expect(sandbox.commands).toHaveLength(3);
    expect(again.output()).not.toContain(sandbox.botToken);
    // It opened no store: the data folder is as it was.
    expect(await readdir(dataDir)).toEqual([]);
  });

  it('registers, for each other bot of HERALD_DISCORD_IDENTITIES, the commands every bot has (/agent) with its own token', async () => {
    const ops = sandbox.addBot('herald-ops');
    const run = runHerald(['commands', 'register'], { DISCORD_TOKEN: sandbox.botToken, DISCORD_API_URL: sandbox.apiUrl, HERALD_DATA_DIR: dataDir, HERALD_DISCORD_IDENTITIES: 'ops=env:OPS_BOT_TOKEN', OPS_BOT_TOKEN: ops.token });
    expect((await run.exited).code, run.output()).toBe(0);
    expect(run.output().split('\n'), run.output()).toEqual(expect.arrayContaining(['registered: /agent, /destinations, /media', 'registered as ops: /agent']));
    expect(sandbox.commandsOf(ops.user.id).map((c) => c.name)).toEqual(['agent']);
    expect(sandbox.commands.map((c) => c.name).sort()).toEqual(['agent', 'destinations', 'media']);
    expect(run.output()).not.toContain(ops.token);

    // A bot whose token Discord refuses is named, and the command fails.
    sandbox.revokeBot(ops.token);
    const refused = runHerald(['commands', 'register'], { DISCORD_TOKEN: sandbox.botToken, DISCORD_API_URL: sandbox.apiUrl, HERALD_DATA_DIR: dataDir, HERALD_DISCORD_IDENTITIES: 'ops=env:OPS_BOT_TOKEN', OPS_BOT_TOKEN: ops.token });
    expect((await refused.exited).code, refused.output()).not.toBe(0);
    expect(refused.output()).toContain('Discord rejected the token of identity ops (HERALD_DISCORD_IDENTITIES) (401)');
    expect(refused.output()).not.toMatch(STACK_LINE);
    expect(refused.output()).not.toContain(ops.token);
  });
});
