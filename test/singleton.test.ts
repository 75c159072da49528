import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { openStore, type Store } from '../src/infra/db/database.js';
import { holdSingleton, type Singleton } from '../src/infra/db/singleton.js';
import { migratedStore, onPostgres, type MigratedStore } from './support/db.js';
import { waitFor } from './support/wait.js';

const TTL = 1_500;

/** A process taking part in holding one name: when it held it, and when it let go. */
function contender(store: Store, name: string, holder: string): { s: Singleton; events: { what: 'acquired' | 'lost'; at: number }[] } {
  const events: { what: 'acquired' | 'lost'; at: number }[] = [];
  const s = holdSingleton({ kind: store.kind, db: store.db as Kysely<unknown> }, name, {
    holder,
    ttlMs: TTL,
    onAcquired: () => events.push({ what: 'acquired', at: performance.now() }),
    onLost: () => {
      events.push({ what: 'lost', at: performance.now() });
    },
  });
  return { s, events };
}

describe.skipIf(!onPostgres)('holdSingleton on PostgreSQL', () => {
  let fixture: MigratedStore | undefined;
  const extra: Store[] = [];
  const open = async (): Promise<Store> => {
    const s = await openStore({ databaseUrl: fixture?.db.databaseUrl, dataDir: fixture?.db.dataDir ?? '' });
    extra.push(s);
    return s;
  };
  beforeAll(async () => {
    fixture = await migratedStore();
  });
  afterAll(async () => {
    for (const s of extra) await s.close().catch(() => undefined);
    await fixture?.close();
  });

  it('one of two holds it; the other takes it over within the TTL after the holder stops renewing', async () => {
    const [sa, sb] = [await open(), await open()];
    const a = contender(sa, 'test:pair', 'a');
    await waitFor(() => a.s.held(), 'a holds it', 5_000);
    const b = contender(sb, 'test:pair', 'b');
    // b keeps trying for longer than a TTL and never holds it while a renews.
    await new Promise((r) => setTimeout(r, TTL * 1.5));
    expect(b.s.held()).toBe(false);
    expect(b.s.holder()).toBe('a');
    // a stops renewing without giving the lease up (as a killed process would).
    const stopped = performance.now();
    (a.s as unknown as { timer: NodeJS.Timeout }).timer.close();
    await waitFor(() => b.s.held(), 'b takes it over', 5_000);
    const takeover = performance.now() - stopped;
    console.log(`singleton takeover after the holder stopped renewing: ${Math.round(takeover)} ms (ttl ${TTL} ms)`);
    expect(takeover).toBeLessThan(TTL * 1.5);
    await b.s.close();
    await a.s.close();
  });

  it('a closed holder gives the lease up: the other takes it at its next try', async () => {
    const [sa, sb] = [await open(), await open()];
    const a = contender(sa, 'test:release', 'a');
    await waitFor(() => a.s.held(), 'a holds it', 5_000);
    const b = contender(sb, 'test:release', 'b');
    await waitFor(() => b.s.holder() === 'a', 'b sees a', 5_000);
    const closed = performance.now();
    await a.s.close();
    await waitFor(() => b.s.held(), 'b takes it', 5_000);
    expect(performance.now() - closed).toBeLessThan(TTL / 2);
    expect(a.events.map((e) => e.what)).toEqual(['acquired']);
    await b.s.close();
  });

  it('a watcher (a process that runs no jobs) sees the holder and never takes the lease, even when it is free', async () => {
    const [sa, sb] = [await open(), await open()];
    const a = contender(sa, 'test:watch', 'a');
    await waitFor(() => a.s.held(), 'a holds it', 5_000);
    let acquired = false;
    const w = holdSingleton({ kind: sb.kind, db: sb.db as Kysely<unknown> }, 'test:watch', { holder: 'w', ttlMs: TTL, watch: true, onAcquired: () => (acquired = true) });
    await waitFor(() => w.holder() === 'a', 'the watcher sees a', 5_000);
    await a.s.close();
    // It has looked since the lease became free, and left it free.
    await waitFor(() => w.holder() === undefined, 'the watcher sees nobody holds it', 5_000);
    const rows = await sql<{ n: number }>`select count(*)::int as n from singleton_leases where name = 'test:watch'`.execute(sb.db);
    expect(rows.rows[0]?.n).toBe(0);
    expect(w.held()).toBe(false);
    expect(acquired).toBe(false);
    await w.close();
  });

  it('a holder that loses the database gives up before another can take the lease over', async () => {
    const [sa, sb] = [await open(), await open()];
    const a = contender(sa, 'test:cut', 'a');
    await waitFor(() => a.s.held(), 'a holds it', 5_000);
    const b = contender(sb, 'test:cut', 'b');
    await waitFor(() => b.s.holder() === 'a', 'b sees a', 5_000);
    // a's connections are gone: its renewals fail.
    await sa.close();
    await waitFor(() => b.s.held(), 'b takes it over', 5_000);
    const lost = a.events.find((e) => e.what === 'lost');
    const acquired = b.events.find((e) => e.what === 'acquired');
    expect(lost).toBeDefined();
    expect(acquired).toBeDefined();
    // a stopped using it well before b started: never two holders at once.
    expect((acquired?.at ?? 0) - (lost?.at ?? 0)).toBeGreaterThan(TTL / 4);
    expect(a.s.held()).toBe(false);
    await a.s.close();
    await b.s.close();
  });

  it('a holder whose connection stays down stands down: the other takes over at its next try; it bids again after the rest', async () => {
    const [sa, sb] = [await open(), await open()];
    const downMs = 1_000;
    let stopped = 0;
    let acquiredA = 0;
    const a = holdSingleton({ kind: sa.kind, db: sa.db as Kysely<unknown> }, 'test:down', {
      holder: 'a',
      ttlMs: TTL,
      downMs,
      // Its connection never comes up (the platform cannot be reached from here).
      up: () => false,
      onAcquired: () => (acquiredA += 1),
      onLost: async () => {
        await new Promise((r) => setTimeout(r, 50));
        stopped = performance.now();
      },
    });
    await waitFor(() => a.held(), 'a holds it', 5_000);
    const heldAt = performance.now();
    const b = contender(sb, 'test:down', 'b');
    await waitFor(() => b.s.held(), 'b takes it over', 10_000);
    const takeover = performance.now() - heldAt;
    console.log(`singleton takeover from a holder whose connection stayed down: ${Math.round(takeover)} ms after it took the lease (down bound ${downMs} ms, ttl ${TTL} ms)`);
    // a stopped using the connection before b took the lease, after the bound, and well before the lease's TTL would have run out unrenewed.
    expect(stopped).toBeGreaterThan(0);
    expect(stopped).toBeLessThanOrEqual(b.events[0]?.at ?? 0);
    expect(takeover).toBeGreaterThanOrEqual(downMs);
    expect(takeover).toBeLessThan(downMs + TTL);
    expect(a.held()).toBe(false);
    // After the rest a bids again, and sees b (whose connection is up) holding it.
    await new Promise((r) => setTimeout(r, downMs + TTL / 2));
    expect(a.held()).toBe(false);
    expect(a.holder()).toBe('b');
    expect(acquiredA).toBe(1);
    // Once b lets it go, a takes it again.
    await b.s.close();
    await waitFor(() => a.held(), 'a holds it again', 5_000);
    expect(acquiredA).toBe(2);
    await a.close();
  });
});

describe('holdSingleton on PGlite', () => {
  it('is never held by a watcher', async () => {
    const w = holdSingleton({ kind: 'pglite', db: {} as Kysely<unknown> }, 'test:watch', { holder: 'w', ttlMs: TTL, watch: true, onAcquired: () => expect.fail('a watcher took it') });
    await Promise.resolve();
    expect(w.held()).toBe(false);
    expect(w.holder()).toBeUndefined();
    await w.close();
  });

  it('is held at once by the one process that opens the store', async () => {
    let acquired = 0;
    const s = holdSingleton({ kind: 'pglite', db: undefined as unknown as Kysely<unknown> }, 'test:local', { holder: 'me', ttlMs: TTL, onAcquired: () => (acquired += 1) });
    await waitFor(() => acquired === 1, 'acquired', 1_000);
    expect(s.held()).toBe(true);
    await s.close();
    expect(s.held()).toBe(false);
  });
});
