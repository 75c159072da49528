import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { claimDue, finishAttempt } from '../src/modules/deliveries/delivery.repository.js';
import { TWIN_DOUBT_CLEAR_MS, yieldTwins } from '../src/modules/deliveries/delivery.twins.js';
import type { DeliveriesDb, DeliveryRow } from '../src/modules/deliveries/delivery.table.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { migratedStore, type MigratedStore } from './support/db.js';

/**
 * Twins (the same body to the same target) take turns in the claim (src/modules/deliveries/delivery.twins.ts):
 * never two in flight together, the oldest first, and a twin's doubt holds the others back only
 * while a message of theirs could be confused with its own.
 */
describe('the twin lane in the claim', () => {
  let fixture: MigratedStore;
  const t0 = new Date('2026-12-06T12:00:00Z');
  const at = (ms: number) => new Date(t0.getTime() + ms);
  const db = () => tablesOf<DeliveriesDb>(fixture.store.db);
  const LEASE = 60_000;

  beforeAll(async () => {
    fixture = await migratedStore();
  }, 60_000);
  afterAll(async () => {
    await fixture?.close();
  });
  beforeEach(async () => {
    await sql`delete from deliveries`.execute(fixture.store.db);
  });

  async function row(id: string, created: Date, content: string, more: Partial<Record<keyof DeliveryRow, unknown>> = {}): Promise<void> {
    await db()
      .insertInto('deliveries')
      .values({ request_id: id, kind: 'post', target: '{"guild_id":"1","destination":"alerts"}', body: JSON.stringify({ content }), payload_hash: 'h', status: 'pending', failure_code: null, created_at: created, next_attempt_at: created, lease_owner: null, lease_expires_at: null, ...more } as never)
      .execute();
  }
  const claim = async (owner: string, now: Date, limit = 10) => (await claimDue(db(), owner, now, LEASE, ['post'], limit)).map((r) => r.request_id).sort();

  it('takes only the oldest of pending twins, none while one is in flight, the next once it is delivered (old code: all of them at once)', async () => {
    await row('a', at(0), 'same');
    await row('b', at(1), 'same');
    await row('c', at(2), 'same');
    await row('x', at(3), 'other');
    expect(await claim('w1', at(100))).toEqual(['a', 'x']);
    // Another worker, another claim: the twins wait for `a`.
    expect(await claim('w2', at(200))).toEqual([]);
    expect(await finishAttempt(db(), 'a', { owner: 'w1', token: null }, { status: 'delivered', message_id: 'm1' })).toBe(true);
    expect(await claim('w2', at(300))).toEqual(['b']);
  });

  it('a twin the same target gets with another body, or another target with the same body, is no twin', async () => {
    await row('a', at(0), 'same');
    await row('b', at(1), 'same', { target: '{"guild_id":"1","destination":"ops"}' });
    await row('c', at(2), 'same ');
    expect(await claim('w1', at(100))).toEqual(['a', 'b', 'c']);
  });

  it('an expired lease is re-driven before the twins behind it; two left in flight together go oldest first, never stuck', async () => {
    await row('a', at(0), 'same', { status: 'in_flight', lease_owner: 'gone', lease_expires_at: at(50) });
    await row('b', at(1), 'same', { status: 'in_flight', lease_owner: 'gone', lease_expires_at: at(50) });
    await row('c', at(2), 'same');
    expect(await claim('w1', at(100))).toEqual(['a']);
    expect(await finishAttempt(db(), 'a', { owner: 'w1', token: null }, { status: 'delivered', message_id: 'm1' })).toBe(true);
    expect(await claim('w1', at(200))).toEqual(['b']);
  });

  it('a twin left unknown in doubt holds the others back for TWIN_DOUBT_CLEAR_MS past its doubt, and no longer', async () => {
    const until = at(1_000);
    await row('u', at(0), 'same', { status: 'unknown', doubt_from: at(0), doubt_until: until });
    await row('b', at(10), 'same');
    expect(await claim('w1', new Date(until.getTime() + TWIN_DOUBT_CLEAR_MS - 1))).toEqual([]);
    expect(await claim('w1', new Date(until.getTime() + TWIN_DOUBT_CLEAR_MS + 1))).toEqual(['b']);
  });

  it('a pending twin behind, in doubt, holds an older one back no longer than its doubt: each waits a bounded time, never for good', async () => {
    // `b` was attempted (its insert committed before `a`'s, with a later time) and is in doubt, waiting to look.
    await row('a', at(0), 'same');
    await row('b', at(1), 'same', { doubt_from: at(10), doubt_until: at(20), next_attempt_at: at(100_000) });
    expect(await claim('w1', at(21))).toEqual([]);
    expect(await claim('w1', at(20 + TWIN_DOUBT_CLEAR_MS + 1))).toEqual(['a']);
  });

  it('of two claims that took twins at once, the one that looks after both committed hands its row back as it was', async () => {
    // As two claims on snapshots apart leave it (a twin whose insert committed during the other's claim).
    await row('a', at(0), 'same', { status: 'in_flight', lease_owner: 'w1', lease_token: 't1', lease_expires_at: at(LEASE), attempts: 1 });
    await row('b', at(-5), 'same', { status: 'in_flight', lease_owner: 'w2', lease_token: 't2', lease_expires_at: at(LEASE), attempts: 1, next_attempt_at: at(-5) });
    expect([...(await yieldTwins(db(), 'w2', at(10), [{ request_id: 'b', claimed_from: 'pending', lease_token: 't2' }]))]).toEqual(['b']);
    const b = await db().selectFrom('deliveries').selectAll().where('request_id', '=', 'b').executeTakeFirstOrThrow();
    expect(b).toMatchObject({ status: 'pending', attempts: 0, lease_owner: null, lease_token: null, lease_expires_at: null, next_attempt_at: at(-5) });
    // `a` is left alone: its twin is no longer in flight.
    expect([...(await yieldTwins(db(), 'w1', at(10), [{ request_id: 'a', claimed_from: 'pending', lease_token: 't1' }]))]).toEqual([]);
  });
});
