import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { withDatabase } from '../support/global-setup.js';
import { startHeraldProcess, type HeraldProcess } from '../support/process.js';

/**
 * The system under fuzz: the real CLI (`herald serve`) in a child process, in sandbox mode (no
 * DISCORD_TOKEN: its own local Discord, as `npm start` runs it), so a crash anywhere in it, the
 * sandbox included, is observed as the process dying. On a fresh PGlite folder, or a fresh
 * database of a PostgreSQL server when `databaseUrl` is given (then rows can be counted too).
 */
export interface Target {
  url: string;
  sandboxUrl: string;
  bridgeToken: string;
  adminToken: string;
  proc: HeraldProcess;
  /** Rows per table (PostgreSQL only), but for the tables Herald writes in the background. */
  rowCounts(): Promise<Record<string, number> | undefined>;
  alive(): boolean;
  stop(): Promise<void>;
}

/**
 * Tables Herald writes on its own while requests come and go, so a row appearing in one says nothing
 * about the request just refused: sent_messages is filled by the gateway's MESSAGE_CREATE reports of
 * messages the dispatcher sends for deliveries accepted earlier. (Whether anything was ever sent for
 * a refused request_id is checked against Discord's messages at the end of the run.)
 * archive_actions is the archive's action log: it records every admin action, a refused one too
 * (`result: refused`), which is what it is for.
 */
const BACKGROUND_TABLES: readonly string[] = ['sent_messages', 'archive_actions'];

export async function startTarget(options: { databaseUrl?: string | undefined } = {}): Promise<Target> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-fuzz-'));
  let databaseUrl: string | undefined;
  let admin: pg.Client | undefined;
  let counter: pg.Client | undefined;
  const name = `herald_fuzz_${randomBytes(6).toString('hex')}`;
  const bridgeToken = randomBytes(32).toString('base64url');
  const adminToken = randomBytes(32).toString('base64url');
  let proc: HeraldProcess | undefined;
  const cleanup = async (): Promise<void> => {
    if (proc !== undefined && proc.child.exitCode === null && proc.child.signalCode === null) {
      proc.kill('SIGTERM');
      const exited = await Promise.race([proc.exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 15_000))]);
      if (!exited) {
        proc.kill('SIGKILL');
        await proc.exited;
      }
    }
    await counter?.end().catch(() => undefined);
    if (admin !== undefined) {
      await admin.query(`drop database if exists ${name} with (force)`).catch(() => undefined);
      await admin.end().catch(() => undefined);
    }
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    if (options.databaseUrl !== undefined && options.databaseUrl !== '') {
      admin = new pg.Client({ connectionString: options.databaseUrl });
      await admin.connect();
      await admin.query(`create database ${name}`);
      databaseUrl = withDatabase(options.databaseUrl, name);
    }
    proc = await startHeraldProcess(['serve'], {
      PORT: '0',
      HOST: '127.0.0.1',
      HERALD_SANDBOX_PORT: '0',
      HERALD_DATA_DIR: dataDir,
      MCP_BRIDGE_TOKEN: bridgeToken,
      HERALD_ADMIN_TOKEN: adminToken,
      HERALD_POLL_MS: '200',
      HERALD_RETRY_BASE_MS: '50',
      HERALD_MAX_ATTEMPTS: '3',
      HERALD_DISCORD_TIMEOUT_MS: '3000',
      HERALD_LEASE_MS: '10000',
      HERALD_SHUTDOWN_GRACE_MS: '2000',
      // The bot the contract's handoff example names: handoffs are on, so their fields are judged, not refused whole.
      HERALD_TRUSTED_BOT_IDS: '111111111111111112',
      ...(databaseUrl !== undefined ? { DATABASE_URL: databaseUrl } : {}),
    });
    const started = proc
      .output()
      .split('\n')
      .find((l) => l.includes('"msg":"herald started"'));
    const sandboxUrl = (JSON.parse(started ?? '{}') as { sandbox?: string }).sandbox;
    if (proc.url === undefined || sandboxUrl === undefined) throw new Error(`herald serve did not report its URLs:\n${proc.output()}`);
    if (databaseUrl !== undefined) {
      counter = new pg.Client({ connectionString: databaseUrl });
      await counter.connect();
    }
    const tables =
      counter === undefined
        ? []
        : (await counter.query<{ table_name: string }>(`select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' and table_name not like 'kysely%' order by 1`)).rows
            .map((r) => r.table_name)
            .filter((t) => !BACKGROUND_TABLES.includes(t));
    const p = proc;
    return {
      url: proc.url,
      sandboxUrl,
      bridgeToken,
      adminToken,
      proc,
      async rowCounts() {
        if (counter === undefined || tables.length === 0) return undefined;
        const sql = tables.map((t) => `select '${t}' as t, count(*)::int as n from "${t}"`).join(' union all ');
        const rows = (await counter.query<{ t: string; n: number }>(sql)).rows;
        return Object.fromEntries(rows.map((r) => [r.t, r.n]));
      },
      alive: () => p.child.exitCode === null && p.child.signalCode === null,
      stop: cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
