import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../src/infra/log.js';
import { beforeLeaving, brokenFence, fenceUntil, LeaseLostError, withFence } from '../src/infra/faults/fence.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { deliveryQueue } from '../src/modules/deliveries/delivery.jobs.js';
import { acquireEditLock, finishAttempt } from '../src/modules/deliveries/delivery.repository.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';
import { OutboxWorker, type Job, type JobQueue } from '../src/outbox/worker.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { waitFor } from './support/wait.js';

/**
 * Fencing (src/infra/faults/fence.ts, src/outbox/leased-table.ts): a process that stalled past its
 * lease and carries on sends nothing more and writes nothing. Real stalls (SIGSTOP) of real
 * processes are in test/fence-pause.test.ts and `npm run chaos`; these are the rules one by one.
 */
describe('fences', () => {
  it('a fence in force stops a request from leaving once its deadline (monotonic) has passed; outside any fence nothing is stopped', async () => {
    expect(() => beforeLeaving()).not.toThrow();
    const deadline = performance.now() + 50;
    await withFence(fenceUntil(deadline, 'the test lease'), async () => {
      expect(() => beforeLeaving()).not.toThrow();
      await waitFor(() => performance.now() > deadline, 'the fence to pass', 2_000);
      expect(brokenFence()?.what).toBe('the test lease');
      expect(() => beforeLeaving()).toThrow(LeaseLostError);
    });
    // Fences nest: the outer one holds, an inner one that passed still stops the request.
    await withFence(fenceUntil(performance.now() + 60_000, 'outer'), () =>
      withFence(fenceUntil(performance.now() - 1, 'inner'), async () => {
        await Promise.resolve();
        expect(() => beforeLeaving()).toThrow('inner ended before the request left');
      }),
    );
  });

  it("the worker runs a job under its lease's fence: a handler that stalled past its lease cannot send, with no timer needed", async () => {
    interface FakeJob extends Job {
      readonly id: string;
    }
    let handed = false;
    const queue: JobQueue<FakeJob> = {
      name: 'fake',
      claim: async () => {
        if (handed) return [];
        handed = true;
        return [{ id: 'j1', kind: 'k', attempts: 1, leaseToken: 't1' }];
      },
      release: async () => 0,
      quarantine: async () => false,
      oldestDue: async () => null,
    };
    const outcome: { err?: unknown; lease?: unknown } = {};
    const worker = new OutboxWorker<FakeJob>(queue, { now: () => new Date() }, createLogger('silent'), { leaseMs: 400, pollMs: 50, concurrency: 1, shutdownGraceMs: 1_000 });
    worker.register({
      kind: 'k',
      retry: { maxAttempts: 3, baseMs: 10 },
      handle: async (_job, context) => {
        outcome.lease = context.lease;
        expect(context.fence.holds()).toBe(true);
        expect(() => beforeLeaving()).not.toThrow();
        // A stall: the lease (less its margin) passes before the request would leave.
        await waitFor(() => !context.fence.holds(), 'the lease to pass', 5_000);
        try {
          beforeLeaving();
        } catch (err) {
          outcome.err = err;
          throw err;
        }
      },
    });
    worker.start();
    try {
      await waitFor(() => outcome.err !== undefined, 'the stalled job to be stopped', 10_000);
    } finally {
      await worker.stop();
    }
    expect(outcome.err).toBeInstanceOf(LeaseLostError);
    expect(outcome.lease).toEqual({ owner: worker.owner, token: 't1' });
  });
});

describe('lease tokens and the edit lease, on the store', () => {
  let fixture: MigratedStore;
  const t0 = new Date('2026-12-06T12:00:00Z');
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

  const insert = async (id: string) =>
    tablesOf<DeliveriesDb>(fixture.store.db)
      .insertInto('deliveries')
      .values({ request_id: id, kind: 'post', target: '{"guild_id":"1","destination":"alerts"}', body: '{"content":"x"}', payload_hash: 'h', status: 'pending', failure_code: null, created_at: t0, next_attempt_at: t0 })
      .execute();

  it("an attempt that outlived its lease writes nothing, even when its own worker claimed the row again: each claim's token is its own", async () => {
    const db = tablesOf<DeliveriesDb>(fixture.store.db);
    const queue = deliveryQueue(db);
    await insert('r1');
    const [first] = await queue.claim('w', at(0), 1_000, ['post'], 1);
    // The lease expired; the same worker claims the row again (a new attempt).
    const [second] = await queue.claim('w', at(5_000), 1_000, ['post'], 1);
    expect(first?.leaseToken).toEqual(expect.any(String));
    expect(second?.leaseToken).toEqual(expect.any(String));
    expect(second?.leaseToken).not.toBe(first?.leaseToken);
    // The stale attempt comes back first and would record a failure over the live attempt.
    expect(await finishAttempt(db, 'r1', { owner: 'w', token: first?.leaseToken ?? null }, { status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE', reason: 'stale' })).toBe(false);
    expect(await finishAttempt(db, 'r1', { owner: 'w', token: second?.leaseToken ?? null }, { status: 'delivered', channel_id: '1', message_id: '2', url: null, reason: null })).toBe(true);
    const row = await db.selectFrom('deliveries').select(['status', 'message_id', 'lease_owner', 'lease_token']).where('request_id', '=', 'r1').executeTakeFirstOrThrow();
    expect(row).toEqual({ status: 'delivered', message_id: '2', lease_owner: null, lease_token: null });
  });

  it('an expired edit lease is taken over only once the settle time has passed after it ended; one given back, at once', async () => {
    const db = tablesOf<DeliveriesDb>(fixture.store.db);
    await insert('orig');
    expect(await acquireEditLock(db, 'orig', 'a', at(0), 5_000, 5_000)).toEqual({ last_applied_seq: null, last_applied_by: null });
    // Expired at 5 s: not before 10 s.
    expect(await acquireEditLock(db, 'orig', 'b', at(6_000), 5_000, 5_000)).toBeUndefined();
    expect(await acquireEditLock(db, 'orig', 'b', at(9_999), 5_000, 5_000)).toBeUndefined();
    expect(await acquireEditLock(db, 'orig', 'b', at(10_000), 5_000, 5_000)).toEqual({ last_applied_seq: null, last_applied_by: null });
  });
});
