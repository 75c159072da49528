import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { openStore } from '../src/infra/db/database.js';
import { onPostgres } from './support/db.js';
import { newRequestId, post, startTestHerald } from './support/herald.js';

describe('embedded PGlite: one process per data folder', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-lock-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('refuses a second store on a folder in use, and frees it on close', async () => {
    const first = await openStore({ databaseUrl: undefined, dataDir: dir });
    await expect(openStore({ databaseUrl: undefined, dataDir: dir })).rejects.toThrow(/is in use by process \d+: embedded PGlite serves one process\. Stop that process, set HERALD_DATA_DIR to another folder, or set DATABASE_URL/);
    await first.close();
    const again = await openStore({ databaseUrl: undefined, dataDir: dir });
    await again.close();
  });

  it('takes over a lock left by a process that died', async () => {
    const dead = spawn(process.execPath, ['-e', '0']);
    const pid = dead.pid ?? 0;
    await new Promise((resolve) => dead.once('exit', resolve));
    await writeFile(path.join(dir, 'pglite.lock'), String(pid));
    const store = await openStore({ databaseUrl: undefined, dataDir: dir });
    await store.close();
  });
});

describe('PostgreSQL connections dropped under Herald', () => {
  it.skipIf(!onPostgres)('survives the server terminating its connections, and keeps accepting and delivering', async () => {
    const h = await startTestHerald({ env: { HERALD_GATEWAY: 'off' } });
    try {
      await h.mapDestination();
      const first = newRequestId();
      await h.bridge.post('/mcp/deliveries', post(first, 'before the drop'));
      await h.waitForState(first, 'delivered');
      // What a server restart or failover does to every open session, idle pool connections included.
      const admin = new pg.Client({ connectionString: h.db.databaseUrl });
      await admin.connect();
      const killed = await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()');
      await admin.end();
      expect(killed.rowCount).toBeGreaterThan(0);
      const second = newRequestId();
      const res = await h.bridge.post('/mcp/deliveries', post(second, 'after the drop'));
      expect(res.status).toBe(202);
      await h.waitForState(second, 'delivered');
    } finally {
      await h.close();
    }
  });
});
