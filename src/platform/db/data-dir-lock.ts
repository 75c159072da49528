import { constants } from 'node:fs';
import { access, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { StartupError } from '../startup.js';

// Light on purpose (no database driver): the CLI checks the data folder with it before it starts anything.

const LOCK_FILE = 'pglite.lock';

/**
 * PGlite is one process's database: a second process on the same folder would corrupt it. A lock
 * file holding the owner's pid keeps it to one; a lock left by a dead process is taken over.
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const file = path.join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(file, String(process.pid), { flag: 'wx' });
      return () => rm(file, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw unusableDataDir(dataDir, err) ?? err;
      const owner = await liveOwner(file);
      if (owner !== undefined) throw dataDirInUse(dataDir, owner);
      await rm(file, { force: true });
    }
  }
  throw new StartupError(`cannot lock HERALD_DATA_DIR (${dataDir}): another process keeps taking ${LOCK_FILE}`);
}

/**
 * Before start-up: the data folder exists (or is made) and Herald may write there, and with
 * embedded PGlite (`embedded`) no live process holds it. The lock itself is taken when the store opens.
 */
export async function checkDataDir(dataDir: string, embedded: boolean): Promise<void> {
  try {
    await mkdir(dataDir, { recursive: true });
    await access(dataDir, constants.W_OK);
  } catch (err) {
    throw unusableDataDir(dataDir, err) ?? err;
  }
  if (!embedded) return;
  const owner = await liveOwner(path.join(dataDir, LOCK_FILE));
  if (owner !== undefined && owner !== process.pid) throw dataDirInUse(dataDir, owner);
}

function dataDirInUse(dataDir: string, owner: number): StartupError {
  return new StartupError(
    `HERALD_DATA_DIR (${dataDir}) is in use by process ${owner}: embedded PGlite serves one process. ` +
      `Stop that process, set HERALD_DATA_DIR to another folder, or set DATABASE_URL to share one PostgreSQL database`,
  );
}

/** The plain-words version of a folder Herald cannot make or write, or undefined for another failure. */
function unusableDataDir(dataDir: string, err: unknown): StartupError | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === undefined || !['EACCES', 'EPERM', 'EROFS', 'ENOTDIR', 'EEXIST'].includes(code)) return undefined;
  return new StartupError(`cannot write to HERALD_DATA_DIR (${dataDir}): ${code}: set HERALD_DATA_DIR to a folder Herald may write`, { cause: err });
}

/** The pid in the lock file, when that process is alive. */
async function liveOwner(file: string): Promise<number | undefined> {
  const owner = Number(await readFile(file, 'utf8').catch(() => 'NaN'));
  return Number.isInteger(owner) && owner > 0 && isAlive(owner) ? owner : undefined;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
