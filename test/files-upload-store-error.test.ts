import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestHerald, type TestHerald } from './support/herald.js';

/**
 * An upload the store fails under (PostgreSQL gone, a table it cannot write) answers 500 at once.
 * Before, once its body had been read (the request stream then counts as destroyed), the route took
 * the failure for a client that had gone away and sent no answer at all: the caller waited for ever,
 * and the open connection held Herald's shutdown.
 */
describe('an upload the store fails under', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
  });
  afterAll(() => h.close());

  it('answers 500 at once, and the next upload is stored once the store is back', async () => {
    const db = h.herald.store.db;
    await sql`alter table files rename to files_away`.execute(db);
    const send = () =>
      fetch(`${h.url}/mcp/files?filename=f.bin`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.bridgeToken}`, 'content-type': 'application/octet-stream' },
        body: randomBytes(256),
        signal: AbortSignal.timeout(10_000),
      });
    try {
      const failed = await send();
      expect(failed.status).toBe(500);
      expect(await failed.json()).toEqual({ error: 'internal error' });
    } finally {
      await sql`alter table files_away rename to files`.execute(db);
    }
    expect((await send()).status).toBe(201);
  });
});
