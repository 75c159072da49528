import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../src/infra/db/database.js';
import { burstPacerFor, SharedBurstPacer, tierOf } from '../src/platforms/slack/slack-pacer.js';
import { storesOnOneDatabase } from './support/db.js';

/**
 * Slack's limits belong to the workspace (a method's tier) or the channel (posts): every process
 * sending as one bot shares each budget through the database, a burst first and then evenly spaced.
 */
describe('Slack budgets shared by processes', () => {
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

  it('lets a burst through at once, then spaces the rest at the rate, across every process', async () => {
    // Turns 500 ms apart: far wider than a loaded machine's database round trips, so the burst and
    // the paced turns are told apart by the pacer, not by how quick the machine is.
    const budget = { perSecond: 2, burst: 5 };
    const pacers = stores.map((s) => burstPacerFor({ kind: s.kind, db: s.db as Kysely<unknown> }, 'test:slack-burst', budget));
    const starts: number[] = [];
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 15 }, async (_, i) => {
        await pacers[i % pacers.length]?.acquire();
        starts.push(performance.now() - t0);
      }),
    );
    starts.sort((a, b) => a - b);
    // The burst goes at once (before the first paced turn); the next ten wait their turn, 500 ms apart.
    expect(starts[4]).toBeLessThan(400);
    expect(starts[5]).toBeGreaterThan(500 - 40);
    expect(starts[14]).toBeGreaterThan(5000 - 40);
    expect(pacers.every((p) => !(p instanceof SharedBurstPacer) || p.unpaced === 0)).toBe(true);
  });

  it('with a burst of one (posts in a channel), spaces every request at the rate', async () => {
    const s = stores[0] as Store;
    const pacer = burstPacerFor({ kind: s.kind, db: s.db as Kysely<unknown> }, 'test:slack-post', { perSecond: 4, burst: 1 });
    const t0 = performance.now();
    for (let i = 0; i < 3; i++) await pacer.acquire();
    expect(performance.now() - t0).toBeGreaterThan(500 - 40);
  });

  it('a wait given up gives its turn back, in every process: the budget does not run ahead of what is sent', async () => {
    const pacers = stores.map((s) => burstPacerFor({ kind: s.kind, db: s.db as Kysely<unknown> }, 'test:slack-give-back', { perSecond: 2, burst: 1 }));
    await pacers[0]?.acquire();
    const controller = new AbortController();
    const waits = Array.from({ length: 30 }, (_, i) => pacers[i % pacers.length]?.acquire(controller.signal).then(() => 'went', () => 'gave up'));
    // Let every request take its turn (30 turns: 15 s ahead), then give up.
    await new Promise((r) => setTimeout(r, 300));
    controller.abort();
    expect((await Promise.all(waits)).filter((w) => w === 'gave up').length).toBeGreaterThanOrEqual(29);
    const t0 = performance.now();
    await pacers[1 % pacers.length]?.acquire();
    // Without the turns given back this waits 15 s.
    expect(performance.now() - t0).toBeLessThan(1_500);
  });

  it("knows Slack's tiers of the methods Herald calls (Tier 3 for any other)", () => {
    expect(tierOf('conversations.history')).toMatchObject({ tier: 3, budget: { perSecond: 40 / 60, burst: 9 } });
    expect(tierOf('conversations.list')).toMatchObject({ tier: 2 });
    expect(tierOf('users.info')).toMatchObject({ tier: 4 });
    expect(tierOf('some.newMethod')).toMatchObject({ tier: 3 });
  });
});
