import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { checkDataDir, lockDataDir } from '../src/infra/db/data-dir-lock.js';
import { holdDataDir } from './support/lock-holder.js';
import { killRunningProcesses } from './support/process.js';
import { waitFor } from './support/wait.js';

const inUse = (dir: string, pid: number): string =>
  `HERALD_DATA_DIR (${dir}) is in use by process ${pid}: embedded PGlite serves one process. Stop that process, set HERALD_DATA_DIR to another folder, or set DATABASE_URL to share one PostgreSQL database`;

describe('the embedded store lock is released by the kernel with its process', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-lock-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));
  let unrelated: ChildProcess;
  beforeAll(() => {
    unrelated = spawn(process.execPath, ['-e', 'setInterval(() => undefined, 60_000)'], { stdio: 'ignore' });
  });
  afterAll(async () => {
    unrelated.kill('SIGKILL');
    await killRunningProcesses();
  });

  it('a live holder excludes another with the pid in the message; once it is SIGKILLed the lock is taken at once', async () => {
    const holder = await holdDataDir(dir);
    await expect(lockDataDir(dir)).rejects.toThrow(inUse(dir, holder.pid));
    await expect(checkDataDir(dir, true)).rejects.toThrow(inUse(dir, holder.pid));
    holder.proc.kill('SIGKILL');
    await holder.proc.exited;
    // The socket file is left behind by the kill: it refuses connections, so it is stale.
    expect(await readdir(dir)).toEqual(['pglite.lock']);
    await checkDataDir(dir, true);
    const unlock = await lockDataDir(dir);
    await unlock();
  });

  it('a killed holder not yet reaped (a zombie, whose pid still looks alive) does not block', async () => {
    const holder = await holdDataDir(dir, { unreaped: true });
    await expect(lockDataDir(dir)).rejects.toThrow(inUse(dir, holder.pid));
    process.kill(holder.pid, 'SIGKILL');
    // Dead, not reaped: its parent (`sleep`) never waits, so signal 0 still reaches the pid.
    await waitFor(async () => (await readFile(`/proc/${holder.pid}/stat`, 'utf8')).split(' ')[2] === 'Z', 'the holder to be a zombie');
    expect(() => process.kill(holder.pid, 0)).not.toThrow();
    await checkDataDir(dir, true);
    const unlock = await lockDataDir(dir);
    await unlock();
    holder.proc.kill('SIGKILL');
    await holder.proc.closed;
  });

  it('two holders in one process exclude each other, and closing frees the folder', async () => {
    const unlock = await lockDataDir(dir);
    await expect(lockDataDir(dir)).rejects.toThrow(inUse(dir, process.pid));
    await unlock();
    expect(await readdir(dir)).toEqual([]);
    const again = await lockDataDir(dir);
    await again();
  });

  it.each([
    ['our own pid (Herald restarted with the pid it had)', () => process.pid],
    ['pid 1 (Herald was pid 1 in a container, and is again)', () => 1],
    ['a live unrelated process (the pid reused after a reboot)', () => unrelated.pid ?? 0],
  ])('a pid file left behind holding %s does not block', async (_what, pidOf) => {
    await writeFile(path.join(dir, 'pglite.lock'), String(pidOf()));
    await checkDataDir(dir, true);
    const unlock = await lockDataDir(dir);
    // And the lock taken over is a real one.
    await expect(lockDataDir(dir)).rejects.toThrow(inUse(dir, process.pid));
    await unlock();
  });

  it('holds in a data folder deeper than a socket path may be', async () => {
    const deep = path.join(dir, 'a'.repeat(60), 'b'.repeat(60));
    await mkdir(deep, { recursive: true });
    const holder = await holdDataDir(deep);
    await expect(lockDataDir(deep)).rejects.toThrow(inUse(deep, holder.pid));
    holder.proc.kill('SIGKILL');
    await holder.proc.exited;
    const unlock = await lockDataDir(deep);
    expect(await readdir(deep)).toEqual(['pglite.lock']);
    await unlock();
    expect(await readdir(deep)).toEqual([]);
    // Named relative to the working folder (HERALD_DATA_DIR=./data is the default), deep too.
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      const relative = path.relative(dir, deep);
      expect(Buffer.byteLength(path.join(relative, 'pglite.lock'))).toBeGreaterThan(100);
      const relativeUnlock = await lockDataDir(relative);
      await expect(lockDataDir(deep)).rejects.toThrow(inUse(deep, process.pid));
      await relativeUnlock();
    } finally {
      process.chdir(cwd);
    }
  });
});
