import { Migrator, type Kysely, type Migration, type MigrationResultSet } from 'kysely';
import { coreMigrations } from '../../../migrations/index.js';
import { StartupError } from '../startup.js';
import { isStoreUnavailable, type StoreLog } from './database.js';

export interface MigrateOptions {
  /**
   * Keep retrying for this long while the database cannot be reached (down, still starting up,
   * in recovery), logging each wait; 0 or unset tries once.
   */
  startupTimeoutMs?: number;
  /** Named in the waits and the final error, without its password. */
  databaseUrl?: string | undefined;
  log?: StoreLog;
  /** The migrations the started parts declare in their folders, by name, applied with migrations/'s. */
  declared?: Readonly<Record<string, Migration>>;
}

/** Backoff between start-up attempts: doubles from the base up to the cap, jittered. */
const STARTUP_RETRY_BASE_MS = 250;
const STARTUP_RETRY_MAX_MS = 5_000;

/**
 * Apply every migration not applied yet, migrations/'s and the declared ones, ordered by name.
 * Safe to run from several processes at once.
 */
export async function migrateToLatest<DB>(db: Kysely<DB>, options: MigrateOptions = {}): Promise<MigrationResultSet> {
  const timeoutMs = options.startupTimeoutMs ?? 0;
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await migrateOnce(db, options.declared ?? {});
    } catch (err) {
      // Each attempt runs in one transaction, so a failed one left nothing half done.
      if (isMissingDatabase(err)) throw missingDatabase(options.databaseUrl, err);
      if (isRefusedLogin(err)) {
        throw new StartupError(`PostgreSQL refused the login in DATABASE_URL (${redactUrl(options.databaseUrl)}): ${errorMessage(err)}: fix the user or password there`, { cause: err });
      }
      if (!isStoreUnavailable(err)) throw err;
      const message = errorMessage(err);
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new StartupError(
          `cannot reach the database at DATABASE_URL (${redactUrl(options.databaseUrl)})` +
            `${timeoutMs > 0 ? ` within ${Math.round(timeoutMs / 1000)} s (HERALD_DB_STARTUP_TIMEOUT_MS)` : ''}: ${message}: ` +
            'start PostgreSQL there, or set DATABASE_URL to where it runs',
          { cause: err },
        );
      }
      const ceiling = Math.min(STARTUP_RETRY_MAX_MS, STARTUP_RETRY_BASE_MS * 2 ** attempt);
      const delay = Math.min(left, Math.round(ceiling / 2 + Math.random() * (ceiling / 2)));
      options.log?.warn({ database: redactUrl(options.databaseUrl), err: message, retry_in_ms: delay, gives_up_in_ms: left }, 'database not reachable yet; waiting for it');
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/**
 * migrations/'s and the declared ones, one list: a name declared twice stops start-up, and so does
 * one without an `up` (a stray file of migrations/ named like a migration), named, before any applies.
 */
export async function allMigrations(declared: Readonly<Record<string, Migration>>): Promise<Record<string, Migration>> {
  const all = await coreMigrations();
  for (const [name, migration] of Object.entries(declared)) {
    if (Object.hasOwn(all, name)) throw new StartupError(`the migration ${name} is declared twice: rename one`);
    all[name] = migration;
  }
  const without = Object.entries(all).flatMap(([name, m]) => (typeof (m as Partial<Migration> | undefined)?.up === 'function' ? [] : [name]));
  if (without.length > 0) throw new StartupError(`the migration(s) ${without.join(', ')} export no up function: a migration file exports up (and down), anything else stays out of migrations/`);
  return all;
}

async function migrateOnce<DB>(db: Kysely<DB>, declared: Readonly<Record<string, Migration>>): Promise<MigrationResultSet> {
  const migrations = await allMigrations(declared);
  // A module or platform added to a store that already has later migrations (its folder's own,
  // named when it was written) still applies its own: the names order migrations, they do not
  // forbid one that sorts before the last applied.
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations }, allowUnorderedMigrations: true });
  const result = await migrator.migrateToLatest();
  if (result.error !== undefined) {
    throw result.error instanceof Error ? result.error : new Error(String(result.error));
  }
  return result;
}

function errorMessage(err: unknown): string {
  // pg's AggregateError (every address refused) has an empty message: its parts say what happened.
  if (err instanceof AggregateError && err.message === '') return err.errors.map((e: unknown) => errorMessage(e)).join('; ');
  return err instanceof Error ? err.message : String(err);
}

/** SQLSTATE class 28: the server is up and refused the user or its password. */
function isRefusedLogin(err: unknown): boolean {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  return code === '28P01' || code === '28000';
}

/** PostgreSQL's invalid_catalog_name: the server is up, the database named in the URL is not there. */
function isMissingDatabase(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '3D000';
}

/** Herald does not create databases itself (its role may not be allowed to): say how to. */
function missingDatabase(databaseUrl: string | undefined, err: unknown): StartupError {
  let command = 'createdb <name>';
  try {
    const u = new URL(databaseUrl ?? '');
    const name = decodeURIComponent(u.pathname.replace(/^\//, ''));
    const args = [
      ...(u.hostname !== '' ? ['-h', u.hostname] : []),
      ...(u.port !== '' ? ['-p', u.port] : []),
      ...(u.username !== '' ? ['-U', decodeURIComponent(u.username)] : []),
      name === '' ? '<name>' : name,
    ];
    command = `createdb ${args.map(shellWord).join(' ')}`;
  } catch {
    // An unparsable URL was refused by the configuration already; keep the generic command.
  }
  return new StartupError(`the database named in DATABASE_URL (${redactUrl(databaseUrl)}) does not exist: create it with \`${command}\`, then start Herald again`, { cause: err });
}

function shellWord(word: string): string {
  return /^[A-Za-z0-9_.:/<>@-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** The URL without its password, for logs and messages. */
export function redactUrl(url: string | undefined): string {
  if (url === undefined) return 'unset';
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return 'an unparsable URL';
  }
}
