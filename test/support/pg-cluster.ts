import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import { appendFile, chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { freePort } from './ports.js';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * A throwaway PostgreSQL server of its own, for tests that stop, crash or restart PostgreSQL (never
 * do that to the machine's shared server). Trust auth, fsync off, 127.0.0.1 only, its unix socket
 * inside its folder; `destroy()` removes everything, and so do a process 'exit' hook and a watchdog
 * process if the test process dies without tearing down.
 */
export interface PgCluster {
  readonly port: number;
  readonly dir: string;
  /** postgres://postgres@127.0.0.1:PORT/DB (database defaults to 'postgres'). */
  url(database?: string): string;
  /** `pg_ctl stop -m MODE` (default 'fast'), waiting until the server is gone. */
  stop(mode?: 'immediate' | 'fast'): Promise<void>;
  /** `pg_ctl start` on the same port and folder, waiting until it accepts connections. */
  start(): Promise<void>;
  /** Stop (immediate) and remove the folder; idempotent; never throws. */
  destroy(): Promise<void>;
}

const isRoot = process.getuid?.() === 0;

function binDir(): string {
  if (process.env['PG_BIN'] !== undefined && process.env['PG_BIN'] !== '') return process.env['PG_BIN'];
  const base = '/usr/lib/postgresql';
  const versions = readdirSync(base)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) throw new Error(`no PostgreSQL under ${base}; set PG_BIN`);
  return path.join(base, versions[0] as string, 'bin');
}

/** The command line for a PostgreSQL binary, as the postgres OS user when we are root. */
function command(bin: string, args: string[]): [string, string[]] {
  const exe = path.join(binDir(), bin);
  return isRoot ? ['runuser', ['-u', 'postgres', '--', exe, ...args]] : [exe, args];
}

function run(bin: string, args: string[], timeoutMs = 120_000): Promise<{ code: number | null; output: string }> {
  const [cmd, argv] = command(bin, args);
  return new Promise((resolve, reject) => {
    // pg_ctl start forks the postmaster with its output sent to the log file, so the pipes close
    // with pg_ctl; still, resolve on 'exit' rather than 'close' so a stray inherited fd cannot hang us.
    const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}


export async function startPgCluster(options: { port?: number } = {}): Promise<PgCluster> {
  const dir = await mkdtemp(path.join(tmpdir(), 'herald-pg-'));
  const dataDir = path.join(dir, 'data');
  const logFile = path.join(dir, 'postgres.log');
  const [stopCmd, stopArgs] = command('pg_ctl', ['stop', '-D', dataDir, '-m', 'immediate', '-w', '-t', '30']);
  let watchdog: number | undefined;
  let destroyed = false;

  // Last resort if the test never calls destroy(): stop the server synchronously as the process exits.
  const onExit = () => {
    if (destroyed) return;
    destroyed = true;
    spawnSync(stopCmd, stopArgs, { stdio: 'ignore', timeout: 30_000 });
    rmSync(dir, { recursive: true, force: true });
    if (watchdog !== undefined) {
      try {
        process.kill(-watchdog, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  process.on('exit', onExit);

  const destroy = async () => {
    if (destroyed) return;
    destroyed = true;
    process.off('exit', onExit);
    try {
      // The watchdog leads its own process group (detached): end it and its `sleep`.
      if (watchdog !== undefined) process.kill(-watchdog, 'SIGKILL');
    } catch {
      // already gone
    }
    try {
      await run('pg_ctl', ['stop', '-D', dataDir, '-m', 'immediate', '-w', '-t', '30']);
    } catch {
      // not running, or pg_ctl missing: nothing more to stop
    }
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  };

  try {
    if (isRoot) await chown(dir, uidOf('postgres'), gidOf('postgres'));
    const init = await run('initdb', ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions']);
    if (init.code !== 0) throw new Error(`initdb failed (${init.code}):\n${init.output}`);

    let port = options.port;
    const conf = (p: number) =>
      [
        '',
        '# throwaway test cluster (test/support/pg-cluster.ts)',
        `port = ${p}`,
        `listen_addresses = '127.0.0.1'`,
        `unix_socket_directories = '${dir}'`,
        // fsync off loses nothing when only PostgreSQL crashes (the OS keeps the writes), but
        // synchronous_commit must stay on: off would lose acknowledged commits on an immediate stop.
        'fsync = off',
        'full_page_writes = off',
        'max_connections = 100',
        'shared_buffers = 16MB',
        `logging_collector = off`,
        '',
      ].join('\n');

    // A port picked as free can be taken before the server binds it: pick again a few times.
    for (let attempt = 0; ; attempt++) {
      const p = port ?? (await freePort());
      // postgresql.auto.conf is read last, so the last line written for a setting wins.
      await appendFile(path.join(dataDir, 'postgresql.auto.conf'), conf(p));
      if (isRoot) await chown(path.join(dataDir, 'postgresql.auto.conf'), uidOf('postgres'), gidOf('postgres'));
      const started = await run('pg_ctl', ['start', '-D', dataDir, '-l', logFile, '-w', '-t', '60']);
      if (started.code === 0) {
        port = p;
        break;
      }
      const log = await readFile(logFile, 'utf8').catch(() => '');
      if (options.port !== undefined || attempt >= 4 || !/could not bind|Address already in use/i.test(log)) {
        throw new Error(`pg_ctl start failed (${started.code}):\n${started.output}\n${log}`);
      }
    }

    // If the test process is SIGKILLed, no 'exit' hook runs: a detached watchdog notices the parent
    // is gone and stops the server and removes the folder.
    const dog = spawn(
      'sh',
      ['-c', `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; "$0" "$@" >/dev/null 2>&1; rm -rf '${dir}'`, stopCmd, ...stopArgs],
      { detached: true, stdio: 'ignore' },
    );
    dog.unref();
    watchdog = dog.pid;

    const finalPort = port;
    return {
      port: finalPort,
      dir,
      url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${finalPort}/${database}`,
      async stop(mode = 'fast') {
        const r = await run('pg_ctl', ['stop', '-D', dataDir, '-m', mode, '-w', '-t', '60']);
        if (r.code !== 0) throw new Error(`pg_ctl stop -m ${mode} failed (${r.code}):\n${r.output}`);
      },
      async start() {
        const r = await run('pg_ctl', ['start', '-D', dataDir, '-l', logFile, '-w', '-t', '60']);
        if (r.code !== 0) {
          const log = await readFile(logFile, 'utf8').catch(() => '');
          throw new Error(`pg_ctl start failed (${r.code}):\n${r.output}\n${log.slice(-4000)}`);
        }
      },
      destroy,
    };
  } catch (err) {
    await destroy();
    throw err;
  }
}

function idOf(flag: '-u' | '-g', name: string): number {
  const r = spawnSync('id', [flag, name], { encoding: 'utf8' });
  const id = Number(r.stdout.trim());
  if (r.status !== 0 || !Number.isInteger(id)) throw new Error(`no OS user ${name}: ${r.stderr}`);
  return id;
}
const uidOf = (name: string) => idOf('-u', name);
const gidOf = (name: string) => idOf('-g', name);
