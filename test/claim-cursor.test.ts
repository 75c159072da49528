import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { deliveryQueue } from '../src/modules/deliveries/delivery.jobs.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';
import { ClaimCursor } from '../src/outbox/leased-table.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { migratedStore, type MigratedStore } from './support/db.js';

/**
 * Under a backlog a delivery claim starts past the rows already claimed (src/outbox/leased-table.ts),
 * yet no due row is left behind: a row below the cursor, and an expired lease, are claimed by the
 * next claim over the whole due range (every ClaimCursor.SWEEP_MS, or when a claim comes back short).
 */
describe('the claim cursor', () => {
  let fixture: MigratedStore;
  const t0 = new Date('2026-12-02T12:00:00Z');
  const at = (ms: number) => new Date(t0.getTime() + ms);

  beforeAll(async () => {
    fixture = await migratedStore();
  }, 60_000);
  afterAll(async () => {
    await fixture?.close();
  });
  beforeEach(async () => {
    await sql`delete from deliveries`.execute(fixture.store.db);
  });

  async function pending(id: string, due: Date, status: 'pending' | 'in_flight' = 'pending'): Promise<void> {
    await tablesOf<DeliveriesDb>(fixture.store.db)
      .insertInto('deliveries')
      .values({ request_id: id, kind: 'post', target: '{"guild_id":"1","destination":"alerts"}', body: JSON.stringify({ content: `x ${id}` }), payload_hash: 'h', status, failure_code: null, created_at: due, next_attempt_at: due, lease_owner: status === 'in_flight' ? 'gone' : null, lease_expires_at: status === 'in_flight' ? due : null })
      .execute();
  }

  it('claims past the cursor under a backlog, and a row below it at the next sweep', async () => {
    const queue = deliveryQueue(tablesOf<DeliveriesDb>(fixture.store.db));
    for (let i = 0; i < 12; i++) await pending(`r${String(i).padStart(2, '0')}`, at(i));
    const ids = async (now: Date) => (await queue.claim('w', now, 60_000, ['post'], 4)).map((j) => j.id).sort();
    expect(await ids(at(1_000))).toEqual(['r00', 'r01', 'r02', 'r03']);
    // Committed late with an older time, and a lease that expired: both below the cursor.
    await pending('late', at(-5));
    await pending('lost', at(-10), 'in_flight');
    expect(await ids(at(1_000))).toEqual(['r04', 'r05', 'r06', 'r07']);
    // At the next sweep (ClaimCursor.SWEEP_MS later) the claim reads the whole due range again, oldest first.
    expect(await ids(at(1_000 + ClaimCursor.SWEEP_MS))).toEqual(['late', 'lost', 'r08', 'r09']);
  });

  it('reads the whole due range as soon as the backlog past the cursor runs out', async () => {
    const queue = deliveryQueue(tablesOf<DeliveriesDb>(fixture.store.db));
    for (let i = 0; i < 6; i++) await pending(`r${i}`, at(i));
    const ids = async () => (await queue.claim('w', at(1_000), 60_000, ['post'], 4)).map((j) => j.id).sort();
    expect(await ids()).toEqual(['r0', 'r1', 'r2', 'r3']);
    await pending('late', at(-5));
    // Past the cursor only r4 and r5 are left: the claim is short, so it looks below it too.
    expect(await ids()).toEqual(['late', 'r4', 'r5']);
    expect(await ids()).toEqual([]);
  });

  it('has no cursor with HERALD_CLAIM_SWEEP_MS=0: every claim reads the whole due range', async () => {
    const queue = deliveryQueue(tablesOf<DeliveriesDb>(fixture.store.db), undefined, 0);
    for (let i = 0; i < 8; i++) await pending(`r${i}`, at(i));
    const ids = async () => (await queue.claim('w', at(1_000), 60_000, ['post'], 4)).map((j) => j.id).sort();
    expect(await ids()).toEqual(['r0', 'r1', 'r2', 'r3']);
    await pending('late', at(-5));
    expect(await ids()).toEqual(['late', 'r4', 'r5', 'r6']);
  });
});
