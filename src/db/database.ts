import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { DeliveryTable } from '../deliveries/delivery.table.js';
import type { DestinationTable } from '../destinations/destination.table.js';
import type { PairingCodeTable, RegistrationTable } from '../identity/identity.table.js';
import { PGliteDialect } from './pglite-dialect.js';

export interface Database {
  deliveries: DeliveryTable;
  destinations: DestinationTable;
  registrations: RegistrationTable;
  pairing_codes: PairingCodeTable;
}

/** The store: Kysely over Postgres or embedded PGlite, plus LISTEN for wake-ups. */
export interface Store {
  readonly kind: 'postgres' | 'pglite';
  readonly db: Kysely<Database>;
  /** Subscribe to NOTIFY on a channel; returns the unsubscribe. */
  listen(channel: string, onNotify: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export interface StoreOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  /** A connection failed outside any query (an idle pooled connection, the LISTEN session). */
  onConnectionError?: (err: Error) => void;
}

export async function openStore(options: StoreOptions): Promise<Store> {
  return options.databaseUrl !== undefined
    ? openPostgres(options.databaseUrl, options.onConnectionError)
    : openPGlite(options.dataDir);
}

function openPostgres(connectionString: string, onConnectionError?: (err: Error) => void): Store {
  const pool = new pg.Pool({ connectionString, max: 10 });
  // An idle connection dropped by the server (restart, failover, admin termination) must not crash
  // the process: the pool replaces it, and the next query reconnects.
  pool.on('error', (err) => onConnectionError?.(err));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const listeners = new Set<pg.Client>();
  return {
    kind: 'postgres',
    db,
    async listen(channel, onNotify) {
      // LISTEN needs a session of its own, outside the pool.
      const client = new pg.Client({ connectionString });
      client.on('error', (err) => onConnectionError?.(err));
      client.on('notification', (n) => {
        if (n.channel === channel) onNotify();
      });
      await client.connect();
      await client.query(`listen ${pg.Client.prototype.escapeIdentifier(channel)}`);
      listeners.add(client);
      return async () => {
        listeners.delete(client);
        await client.end().catch(() => undefined);
      };
    },
    async close() {
      await Promise.all([...listeners].map((c) => c.end().catch(() => undefined)));
      listeners.clear();
      await db.destroy();
    },
  };
}

async function openPGlite(dataDir: string): Promise<Store> {
  await mkdir(dataDir, { recursive: true });
  const unlock = await lockDataDir(dataDir);
  let pglite: PGlite;
  try {
    pglite = await PGlite.create(`${dataDir}/pglite`);
  } catch (err) {
    await unlock();
    throw err;
  }
  const db = new Kysely<Database>({ dialect: new PGliteDialect(pglite) });
  return {
    kind: 'pglite',
    db,
    async listen(channel, onNotify) {
      const unsubscribe = await pglite.listen(channel, onNotify);
      return unsubscribe;
    },
    async close() {
      await db.destroy();
      await pglite.close();
      await unlock();
    },
  };
}

/**
 * PGlite is one process's database: a second process on the same folder would corrupt it. A lock
 * file holding the owner's pid keeps it to one; a lock left by a dead process is taken over.
 */
async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const file = path.join(dataDir, 'pglite.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(file, String(process.pid), { flag: 'wx' });
      return () => rm(file, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = Number(await readFile(file, 'utf8').catch(() => 'NaN'));
      if (Number.isInteger(owner) && isAlive(owner)) {
        throw new Error(`${dataDir} is in use by process ${owner}: embedded PGlite serves one process; set DATABASE_URL to share a PostgreSQL database`);
      }
      await rm(file, { force: true });
    }
  }
  throw new Error(`cannot lock ${dataDir}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
