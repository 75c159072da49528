import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedStore, onPostgres, type MigratedStore } from './support/db.js';

/** Herald's PostgreSQL sessions run without JIT (src/infra/db/database.ts): a long claim spent most of its time compiling itself. */
describe.skipIf(!onPostgres)('the PostgreSQL pool', () => {
  let fixture: MigratedStore;
  beforeAll(async () => {
    fixture = await migratedStore();
  }, 60_000);
  afterAll(async () => {
    await fixture?.close();
  });

  it('opens its sessions with jit off', async () => {
    const { rows } = await sql<{ jit: string }>`show jit`.execute(fixture.store.db);
    expect(rows[0]?.jit).toBe('off');
  });
});
