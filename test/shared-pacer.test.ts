import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kysely } from 'kysely';
import type { Store } from '../src/infra/db/database.js';
import { pacerFor, SharedPacer } from '../src/infra/db/shared-pacer.js';
import { storesOnOneDatabase } from './support/db.js';

/** Discord's global limit is per bot: processes sharing one database share one evenly spaced budget. */
describe('SharedPacer', () => {
  let shared: Awaited<ReturnType<typeof storesOnOneDatabase>> | undefined;
  let stores: Store[] = [];
  beforeAll(async () => {
    // Three "processes": three stores on one database (PGlite: one store, as it has one process).
    shared = await storesOnOneDatabase();
    ({ stores } = shared);
  });
  afterAll(async () => {
    await shared?.close();
  });

  it('spaces requests from every process sharing a budget, so no window holds more than the rate', async () => {
    // Herald's default, 2 below Discord's 50 for jitter; Discord's window is what must not overflow.
    const perSecond = 48;
    const pacers = stores.map((s) => pacerFor({ kind: s.kind, db: s.db as Kysely<unknown> }, 'test:spread', { perSecond, windowLimit: 50 }));
    const starts: number[] = [];
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 80 }, async (_, i) => {
        await pacers[i % pacers.length]?.acquire();
        starts.push(performance.now() - t0);
      }),
    );
    starts.sort((a, b) => a - b);
    // 80 requests at 48/s take at least 79 intervals.
    expect(starts.at(-1)).toBeGreaterThan((79 * 1000) / perSecond - 40);
    // In any second, at most 50 requests: Discord's global window never overflows.
    for (let i = 0; i < starts.length; i++) {
      const inWindow = starts.filter((t) => t >= (starts[i] ?? 0) && t < (starts[i] ?? 0) + 1000).length;
      expect(inWindow).toBeLessThanOrEqual(50);
    }
    expect(pacers.every((p) => !(p instanceof SharedPacer) || p.unpaced === 0)).toBe(true);
  });

  it('lets a request through at once when the budget is idle', async () => {
    const s = stores[0] as Store;
    const pacer = pacerFor({ kind: s.kind, db: s.db as Kysely<unknown> }, 'test:idle', { perSecond: 1, windowLimit: 5 });
    const t0 = performance.now();
    await pacer.acquire();
    expect(performance.now() - t0).toBeLessThan(500);
  });

  it('gives up waiting when the request is aborted', async () => {
    const s = stores[0] as Store;
    const pacer = pacerFor({ kind: s.kind, db: s.db as Kysely<unknown> }, 'test:abort', { perSecond: 1, windowLimit: 5 });
    await pacer.acquire();
    const controller = new AbortController();
    const waiting = pacer.acquire(controller.signal);
    controller.abort(new Error('request timed out'));
    await expect(waiting).rejects.toThrow('request timed out');
  });
});
