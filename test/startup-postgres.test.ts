import { describe, expect, it } from 'vitest';
import { onPostgres } from './support/db.js';
import { runHerald } from './support/process.js';

const STACK_LINE = /^\s+at /m;

// Start-up on a PostgreSQL server (test/startup.test.ts: start-up on either store).
describe('start-up fails fast on PostgreSQL, in plain words', () => {
  it.skipIf(!onPostgres)('says how to create a database DATABASE_URL names that does not exist', async () => {
    const url = new URL(process.env['TEST_DATABASE_URL'] ?? '');
    url.pathname = `/herald_missing_${Date.now()}`;
    const proc = runHerald(['migrate'], { DATABASE_URL: url.toString(), HERALD_DB_STARTUP_TIMEOUT_MS: '60000' });
    expect((await proc.exited).code).toBe(2);
    const createdb = `createdb ${url.hostname !== '' ? `-h ${url.hostname} ` : ''}${url.port !== '' ? `-p ${url.port} ` : ''}${url.username !== '' ? `-U ${url.username} ` : ''}${url.pathname.slice(1)}`;
    expect(proc.output()).toContain(`does not exist: create it with \`${createdb}\`, then start Herald again`);
    expect(proc.output()).not.toMatch(STACK_LINE);
  });
});
