import { constants } from 'node:fs';
import { access, mkdir, mkdtemp, rm, symlink, unlink } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { StartupError } from '../startup.js';

// Light on purpose (no database driver): the CLI checks the data folder with it before it starts anything.

const LOCK_FILE = 'pglite.lock';
/** How long a live holder has to say its pid before the answer names no pid. */
const ANSWER_MS = 10_000;
/** Room for a socket path: sun_path is 108 bytes on Linux, 104 on macOS, with its NUL. */
const SOCKET_PATH_MAX = 100;

/**
 * PGlite is one process's database: a second process on the same folder would corrupt it. The lock
 * is a Unix socket the holder listens on in the folder, so the kernel releases it with the process
 * (killed, crashed, unreaped, in any pid namespace): a live holder accepts a connection and answers
 * with its pid; a socket nobody listens on refuses it, and is a stale lock to take over. No pid is
 * ever judged, so a pid reused after a reboot, Herald's own pid, or pid 1 in a container never
 * blocks a start. A `pglite.lock` left by an older Herald (a plain file holding a pid) refuses a
 * connection too, and is taken over alike.
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const file = path.join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    const server = net.createServer((socket) => {
      socket.on('error', () => socket.destroy());
      socket.end(String(process.pid));
    });
    const bound = await viaShortPath(file, (address) => listen(server, address)).catch((err: unknown) => err as NodeJS.ErrnoException);
    if (bound === undefined) {
      // The lock never keeps Herald running by itself.
      server.unref();
      let released = false;
      return async () => {
        if (released) return;
        released = true;
        // Unlinked while still listening, so never another process's lock taken since: libuv does
        // so for the path it bound; one bound through the short path (gone by now) is unlinked here.
        if (Buffer.byteLength(file) > SOCKET_PATH_MAX) await unlink(file).catch(() => undefined);
        await new Promise<void>((resolve) => server.close(() => resolve()));
      };
    }
    if (bound.code !== 'EADDRINUSE') throw unusableDataDir(dataDir, bound) ?? bound;
    const holder = await probe(file);
    if (holder.live) throw dataDirInUse(dataDir, holder.pid);
    await rm(file, { force: true });
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
  const holder = await probe(path.join(dataDir, LOCK_FILE));
  if (holder.live) throw dataDirInUse(dataDir, holder.pid);
}

function dataDirInUse(dataDir: string, owner: number | undefined): StartupError {
  return new StartupError(
    `HERALD_DATA_DIR (${dataDir}) is in use by ${owner === undefined ? 'another live process' : `process ${owner}`}: embedded PGlite serves one process. ` +
      `Stop that process, set HERALD_DATA_DIR to another folder, or set DATABASE_URL to share one PostgreSQL database`,
  );
}

/** The plain-words version of a folder Herald cannot make or write, or undefined for another failure. */
function unusableDataDir(dataDir: string, err: unknown): StartupError | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === undefined || !['EACCES', 'EPERM', 'EROFS', 'ENOTDIR', 'EEXIST'].includes(code)) return undefined;
  return new StartupError(`cannot write to HERALD_DATA_DIR (${dataDir}): ${code}: set HERALD_DATA_DIR to a folder Herald may write`, { cause: err });
}

function listen(server: net.Server, address: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(address, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * Whether a live process listens on the lock, and the pid it answers with. Nothing there, a plain
 * file, or a socket whose process is gone all refuse the connection: not live.
 */
async function probe(file: string): Promise<{ live: false } | { live: true; pid: number | undefined }> {
  return viaShortPath(
    file,
    (address) =>
      new Promise((resolve) => {
        let connected = false;
        let answer = '';
        const socket = net.connect(address);
        const done = (timedOut: boolean): void => {
          clearTimeout(timer);
          socket.destroy();
          const pid = /^[1-9][0-9]*$/.test(answer) ? Number(answer) : undefined;
          // Live: it named its pid, or it is connected and busy (the kernel accepted; its event loop
          // has not answered yet). A connection closed with no answer is a holder going away as it
          // was asked (a killed process whose last threads still held the socket): not live.
          resolve(connected && (pid !== undefined || timedOut) ? { live: true, pid } : { live: false });
        };
        const timer = setTimeout(() => done(true), ANSWER_MS);
        socket.setEncoding('utf8');
        socket.on('connect', () => (connected = true));
        socket.on('data', (chunk: string) => (answer += chunk));
        socket.on('end', () => done(false));
        socket.on('close', () => done(false));
        socket.on('error', () => done(false));
      }),
  );
}

/**
 * Run `use` with an address for the socket `file`. A socket path is at most about 100 bytes, and a
 * data folder may be deeper: then the address goes through a symlink to the folder from a fresh
 * temporary folder, which binds and connects the socket in the data folder itself, and is removed after.
 */
async function viaShortPath<T>(file: string, use: (address: string) => Promise<T>): Promise<T> {
  if (Buffer.byteLength(file) <= SOCKET_PATH_MAX) return use(file);
  const base = await mkdtemp(path.join(Buffer.byteLength(tmpdir()) < 60 ? tmpdir() : '/tmp', 'herald-lock-'));
  try {
    await symlink(path.resolve(path.dirname(file)), path.join(base, 'd'));
    return await use(path.join(base, 'd', path.basename(file)));
  } finally {
    await rm(base, { recursive: true, force: true });
  }
}
