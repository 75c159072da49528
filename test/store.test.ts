import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../src/db/database.js';

describe('embedded PGlite: one process per data folder', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-lock-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('refuses a second store on a folder in use, and frees it on close', async () => {
    const first = await openStore({ databaseUrl: undefined, dataDir: dir });
    await expect(openStore({ databaseUrl: undefined, dataDir: dir })).rejects.toThrow(/is in use by process \d+: embedded PGlite serves one process; set DATABASE_URL/);
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
