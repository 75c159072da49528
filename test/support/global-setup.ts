import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { migrateToLatest } from '../../src/platform/db/migrate.js';

/**
 * With TEST_DATABASE_URL (a real PostgreSQL server), build one migrated template database; each
 * test database is then a cheap `CREATE DATABASE … TEMPLATE` copy of it.
 */
export default async function setup({ provide }: { provide: (key: 'templateDatabase', value: string) => void }): Promise<() => Promise<void>> {
  const url = process.env['TEST_DATABASE_URL'];
  if (url === undefined || url === '') {
    provide('templateDatabase', '');
    return async () => {};
  }
  const template = `herald_template_${process.pid}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`drop database if exists ${template}`);
  await admin.query(`create database ${template}`);
  const db = new Kysely({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: withDatabase(url, template), max: 1 }) }) });
  await migrateToLatest(db);
  await db.destroy();
  provide('templateDatabase', template);
  return async () => {
    // `_` is a LIKE wildcard: unescaped, 'herald_t_%' also matched (and dropped) every other run's
    // herald_template_<pid> on a shared server, failing that run's remaining tests.
    const leftovers = await admin.query<{ datname: string }>(`select datname from pg_database where datname like 'herald\\_t\\_%' or datname = $1`, [template]);
    for (const row of leftovers.rows) await admin.query(`drop database if exists ${row.datname} with (force)`);
    await admin.end();
  };
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

declare module 'vitest' {
  export interface ProvidedContext {
    templateDatabase: string;
  }
}
