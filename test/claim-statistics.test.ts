import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliveryQueue } from '../src/modules/deliveries/delivery.queue.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { waitFor } from './support/wait.js';

/**
 * A slow claim refreshes the deliveries table's statistics (src/modules/deliveries/delivery.queue.ts):
 * planned from statistics that saw no pending row, every twin check of a burst's claim scanned
 * every pending row. Neither PGlite (no autovacuum) nor PostgreSQL (a tenth of a big table must
 * change first) refreshes them for a burst. On the code before, the statistics stayed stale.
 */
describe('claims and the statistics they are planned from', () => {
  let fixture: MigratedStore;
  beforeAll(async () => {
    fixture = await migratedStore();
  }, 60_000);
  afterAll(async () => {
    await fixture?.close();
  });

  it('a claim slower than the threshold has the table analyzed, so the next claims are planned for the backlog', async () => {
    const db = tablesOf<DeliveriesDb>(fixture.store.db);
    const t0 = new Date('2026-12-02T12:00:00Z');
    const row = (id: string, status: 'pending' | 'delivered', i: number) => ({
      request_id: `${id}${String(i).padStart(63, '0')}`,
      kind: 'post' as const,
      target: JSON.stringify({ guild_id: '1', destination: 'alerts' }),
      body: JSON.stringify({ content: `${status} ${i}` }),
      payload_hash: `h${i}`,
      status,
      failure_code: null,
      created_at: new Date(t0.getTime() + i),
      next_attempt_at: new Date(t0.getTime() + i),
      identity: null,
    });
    // A quiet week: delivered rows only, and statistics that say so.
    await db.insertInto('deliveries').values(Array.from({ length: 500 }, (_, i) => row('d', 'delivered', i))).execute();
    await sql`analyze deliveries`.execute(fixture.store.db);
    const statusValues = async () => String((await sql<{ v: string | null }>`select most_common_vals::text as v from pg_stats where tablename = 'deliveries' and attname = 'status'`.execute(fixture.store.db)).rows[0]?.v ?? '');
    expect(await statusValues()).not.toContain('pending');
    // Then a burst.
    await db.insertInto('deliveries').values(Array.from({ length: 300 }, (_, i) => row('p', 'pending', 1_000 + i))).execute();
    // Threshold 0: every claim counts as slow (the real one is SLOW_CLAIM_MS).
    const queue = deliveryQueue(db, undefined, undefined, undefined, fixture.store.kind === 'postgres', 0);
    const claimed = await queue.claim('w', new Date(t0.getTime() + 60_000), 60_000, ['post'], 4);
    expect(claimed).toHaveLength(4);
    await waitFor(async () => (await statusValues()).includes('pending'), 'statistics that know the pending rows', 20_000);
  });
});
