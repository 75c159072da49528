import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailable, LISTEN_RETRY_MAX_MS, openStore, type Store } from '../src/infra/db/database.js';
import { startPgCluster, type PgCluster } from './support/pg-cluster.js';
import { waitFor } from './support/wait.js';

/** Store.listen() across PostgreSQL restarts, on a throwaway cluster (never the machine's server). */
describe('a self-healing LISTEN session', () => {
  let cluster: PgCluster;
  let store: Store;
  beforeAll(async () => {
    cluster = await startPgCluster();
    store = await openStore({ databaseUrl: cluster.url(), dataDir: '/nonexistent' });
  });
  afterAll(async () => {
    await store?.close();
    await cluster?.destroy();
  });

  async function notify(channel: string): Promise<void> {
    const c = new pg.Client({ connectionString: cluster.url() });
    await c.connect();
    await c.query('select pg_notify($1, $2)', [channel, '']).finally(() => c.end());
  }
  async function listeners(channel: string): Promise<number> {
    const c = new pg.Client({ connectionString: cluster.url() });
    await c.connect();
    const r = await c.query<{ n: string }>(`select count(*) as n from pg_stat_activity where query = $1`, [`listen "${channel}"`]).finally(() => c.end());
    return Number(r.rows[0]?.n);
  }

  it('reconnects after an immediate restart, re-LISTENs, and calls onNotify once for what it missed', async () => {
    let calls = 0;
    const unlisten = await store.listen('heal_test', () => calls++);
    try {
      expect(store.listening()).toBe(true);
      await notify('heal_test');
      await waitFor(() => calls === 1, 'the first notification');

      await cluster.stop('immediate');
      await waitFor(() => !store.listening(), 'the session to be seen lost');
      await cluster.start();
      await waitFor(() => store.listening(), 'the session to come back', 30_000);
      // The reconnect itself counts as a wake-up: notifications sent while down are lost.
      await waitFor(() => calls === 2, 'the catch-up call');
      await notify('heal_test');
      await waitFor(() => calls === 3, 'a notification after the restart');
    } finally {
      await unlisten();
    }
  });

  it('stops reconnecting once unlistened', async () => {
    let calls = 0;
    const unlisten = await store.listen('stop_test', () => calls++);
    await cluster.stop('immediate');
    await waitFor(() => !store.listening(), 'the session to be seen lost');
    await unlisten();
    expect(store.listening()).toBe(true); // no subscriptions left
    await cluster.start();
    // A negative: give a reconnect every chance (past the longest backoff) to show up, and none may.
    const until = Date.now() + LISTEN_RETRY_MAX_MS + 1_000;
    while (Date.now() < until) {
      expect(await listeners('stop_test')).toBe(0);
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(calls).toBe(0);
  });

  it('starts listening even if the server is down at first, once it comes up', async () => {
    await cluster.stop('fast');
    let calls = 0;
    const unlisten = await store.listen('late_test', () => calls++);
    try {
      expect(store.listening()).toBe(false);
      await cluster.start();
      await waitFor(() => store.listening(), 'the session to come up', 30_000);
      await notify('late_test');
      await waitFor(() => calls >= 2, 'the catch-up call and the notification');
    } finally {
      await unlisten();
    }
  });

  it('tells connection failures from query errors', async () => {
    const refused = await new pg.Client({ connectionString: cluster.url().replace(`:${cluster.port}/`, ':1/') }).connect().catch((e: unknown) => e);
    expect(isStoreUnavailable(refused)).toBe(true);
    expect(isStoreUnavailable(Object.assign(new Error('the database system is starting up'), { code: '57P03' }))).toBe(true);
    const bad = await sql`select nope`.execute(store.db).catch((e: unknown) => e);
    expect(isStoreUnavailable(bad)).toBe(false);
    expect(isStoreUnavailable(new Error('duplicate key value violates unique constraint'))).toBe(false);
  });
});

describe('PGlite LISTEN', () => {
  it('is always listening', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'herald-listen-'));
    const store = await openStore({ databaseUrl: undefined, dataDir: dir });
    try {
      expect(store.listening()).toBe(true);
      let calls = 0;
      const unlisten = await store.listen('pglite_test', () => calls++);
      expect(store.listening()).toBe(true);
      await sql`select pg_notify('pglite_test', '')`.execute(store.db);
      await waitFor(() => calls === 1, 'the notification');
      await unlisten();
    } finally {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
