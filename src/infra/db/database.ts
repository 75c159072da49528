import type { PGlite } from '@electric-sql/pglite';
import { chmod, mkdir } from 'node:fs/promises';
import { Kysely, PostgresDialect, type Dialect } from 'kysely';
import pg from 'pg';
import { checkDataDir, lockDataDir } from './data-dir-lock.js';

/**
 * The store: Kysely over Postgres or embedded PGlite, plus LISTEN for wake-ups. `DB` is the
 * application's schema (src/schema.ts): the store itself knows no tables.
 */
export interface Store<DB = unknown> {
  readonly kind: 'postgres' | 'pglite';
  readonly db: Kysely<DB>;
  /**
   * Subscribe to NOTIFY on a channel; returns the unsubscribe. On PostgreSQL the LISTEN session
   * heals itself: when it is lost (restart, failover, termination) it reconnects with capped,
   * jittered backoff, LISTENs again and calls `onNotify` once, since notifications sent while it
   * was down are lost (then with no payload: anything may have changed). The unsubscribe stops
   * reconnecting.
   */
  listen(channel: string, onNotify: (payload?: string) => void): Promise<() => Promise<void>>;
  /** Whether every subscription is LISTENing right now (always true on PGlite, and with none). */
  listening(): boolean;
  close(): Promise<void>;
}

/** What the store says about its connections (pino's shape). */
export interface StoreLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface StoreOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  /** PostgreSQL connections in the pool (default 10). */
  poolSize?: number;
  /** A connection failed outside any query (an idle pooled connection, the LISTEN session). */
  onConnectionError?: (err: Error) => void;
  /** Where the LISTEN session reports losing and regaining its connection. */
  log?: StoreLog;
}

export async function openStore<DB>(options: StoreOptions): Promise<Store<DB>> {
  return options.databaseUrl !== undefined ? openPostgres<DB>(options.databaseUrl, options) : openPGlite<DB>(options.dataDir);
}

/** How long connecting may take before it counts as the database being unavailable. */
const CONNECT_TIMEOUT_MS = 10_000;
/** LISTEN reconnection backoff: doubles from the base up to the cap, each delay jittered. */
export const LISTEN_RETRY_BASE_MS = 100;
export const LISTEN_RETRY_MAX_MS = 5_000;

function openPostgres<DB>(connectionString: string, options: StoreOptions): Store<DB> {
  const onConnectionError = options.onConnectionError;
  // JIT off: Herald's statements are short, and a claim over a long due range (its planner estimate
  // past jit_above_cost) spent most of its time compiling itself, about 160 ms per claim
  // (a claim of a queue whose due rows are many).
  const pool = new pg.Pool({ connectionString, max: options.poolSize ?? 10, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true, options: '-c jit=off' });
  // An idle connection dropped by the server (restart, failover, admin termination) must not crash
  // the process: the pool replaces it, and the next query reconnects.
  pool.on('error', (err) => onConnectionError?.(err));
  // Nor may one checked out: pg-pool listens for errors only on idle clients, and a client that
  // loses its server mid-query or mid-transaction emits 'error' (its query fails too, which is
  // what the request sees). Every pooled client gets a listener of its own for its whole life.
  pool.on('connect', (client) => client.on('error', (err) => onConnectionError?.(err)));
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  const subscriptions = new Set<ListenSession>();
  return {
    kind: 'postgres',
    db,
    async listen(channel, onNotify) {
      // LISTEN needs a session of its own, outside the pool.
      const session = new ListenSession(connectionString, channel, onNotify, options);
      subscriptions.add(session);
      await session.start();
      return async () => {
        subscriptions.delete(session);
        await session.close();
      };
    },
    listening: () => [...subscriptions].every((s) => s.live),
    async close() {
      await Promise.all([...subscriptions].map((s) => s.close()));
      subscriptions.clear();
      await db.destroy();
    },
  };
}

/** One LISTEN session that reconnects itself until closed. */
class ListenSession {
  live = false;
  private client: pg.Client | undefined;
  private closed = false;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly connectionString: string,
    private readonly channel: string,
    private readonly onNotify: (payload?: string) => void,
    private readonly options: StoreOptions,
  ) {}

  /** The first connection; when it fails, retrying has begun and `live` stays false until it works. */
  async start(): Promise<void> {
    await this.connect();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.live = false;
    clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true });
    this.client = client;
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('LISTEN connection ended')));
    client.on('notification', (n) => {
      if (n.channel === this.channel) this.onNotify(n.payload);
    });
    try {
      await client.connect();
      await client.query(`listen ${pg.Client.prototype.escapeIdentifier(this.channel)}`);
    } catch (err) {
      this.lost(client, err instanceof Error ? err : new Error(String(err)));
      return;
    }
    if (this.client !== client) return; // closed (or replaced) meanwhile
    this.live = true;
    const recovered = this.failures > 0;
    this.failures = 0;
    if (recovered) {
      this.options.log?.info({ channel: this.channel }, 'LISTEN re-established');
      // Whatever was notified while the session was down is lost: have the subscriber look now.
      this.onNotify();
    }
  }

  /** The session is gone (or never came up): forget it, and try again after a backoff. */
  private lost(client: pg.Client, err: Error): void {
    if (this.client !== client) return; // an old session, already handled
    this.client = undefined;
    this.live = false;
    client.removeAllListeners('notification');
    client.end().catch(() => undefined);
    if (this.closed) return;
    const ceiling = Math.min(LISTEN_RETRY_MAX_MS, LISTEN_RETRY_BASE_MS * 2 ** this.failures);
    const delay = Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
    if (this.failures === 0) {
      this.options.onConnectionError?.(err);
      this.options.log?.warn({ channel: this.channel, err: err.message }, 'LISTEN connection lost; reconnecting (polling covers wake-ups meanwhile)');
    }
    this.failures++;
    this.timer = setTimeout(() => void this.connect(), delay);
    this.timer.unref();
  }
}

/**
 * Whether an error means the database could not be reached or dropped the connection (server
 * down, restarting, starting up, refusing connections), as opposed to a problem with the query.
 * Such failures are worth retrying later; the HTTP layer answers them 503.
 */
export function isStoreUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (UNREACHABLE_CODES.has(code)) return true;
    // SQLSTATE class 08: connection exception.
    if (/^08[0-9A-Z]{3}$/.test(code)) return true;
  }
  return UNREACHABLE_MESSAGES.some((m) => err.message.includes(m));
}

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
  '57P01', // admin_shutdown: the server is shutting down
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: "the database system is starting up" (or in recovery)
  '53300', // too_many_connections
]);
const UNREACHABLE_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'is not queryable',
  'the database system is',
];

/**
 * The embedded store's shared buffers. initdb writes PostgreSQL's server default, 128MB, which
 * PGlite allocates inside its WebAssembly memory and zeroes at every open, for one process with
 * one connection whose files the kernel caches anyway. With 16MB, measured: an open takes about
 * 0.3 CPU-s instead of 0.7 (after the first in a process), and `herald serve` on its embedded
 * defaults starts with about 120 MB less resident memory (284 MB instead of 408).
 */
const PGLITE_SHARED_BUFFERS = '16MB';

async function openPGlite<DB>(dataDir: string): Promise<Store<DB>> {
  await checkDataDir(dataDir, false);
  const unlock = await lockDataDir(dataDir);
  // Loaded here, not at the top: a PostgreSQL Herald never holds PGlite's code in memory.
  let pglite: PGlite;
  let dialect: Dialect;
  try {
    const [{ PGlite }, { PGliteDialect }] = await Promise.all([import('@electric-sql/pglite'), import('./pglite-dialect.js')]);
    // The database holds message text (DMs, the inbox): only this user may read it, as the
    // uploads and the tokens beside it (PGlite writes its files 0644 under the umask).
    await mkdir(`${dataDir}/pglite`, { recursive: true, mode: 0o700 });
    await chmod(`${dataDir}/pglite`, 0o700);
    pglite = await PGlite.create(`${dataDir}/pglite`, { startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${PGLITE_SHARED_BUFFERS}`] });
    dialect = new PGliteDialect(pglite);
  } catch (err) {
    await unlock();
    throw err;
  }
  const db = new Kysely<DB>({ dialect });
  return {
    kind: 'pglite',
    db,
    async listen(channel, onNotify) {
      const unsubscribe = await pglite.listen(channel, (payload) => onNotify(payload));
      return unsubscribe;
    },
    // In process: there is no connection to lose.
    listening: () => true,
    async close() {
      await db.destroy();
      await pglite.close();
      await unlock();
    },
  };
}

/**
 * Run a write, and while the database is unreachable (a restart, a failover) try it again with
 * capped backoff for up to `budgetMs`; any other error, or the budget spent, is thrown.
 */
export async function retryWhileUnreachable<T>(write: () => Promise<T>, budgetMs: number): Promise<T> {
  const deadline = Date.now() + budgetMs;
  for (let waitMs = 100; ; waitMs = Math.min(waitMs * 2, 2_000)) {
    try {
      return await write();
    } catch (err) {
      if (!isStoreUnavailable(err) || Date.now() + waitMs > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
}
