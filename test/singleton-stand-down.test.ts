import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kysely } from 'kysely';
import { openStore, type Store } from '../src/infra/db/database.js';
import { holdSingleton } from '../src/infra/db/singleton.js';
import { migratedStore, onPostgres, type MigratedStore } from './support/db.js';
import { waitFor } from './support/wait.js';

const TTL = 1_000;

describe.skipIf(!onPostgres)('a singleton holder standing down with nobody to take over', () => {
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

  it('bids again once a TTL has passed without another process taking the lease, not only after its whole rest', async () => {
    // One process bids (the only dispatcher, or a single replica): the platform is down for it, then comes back.
    const store = await open();
    const downMs = 8_000;
    let up = false;
    let acquired = 0;
    const a = holdSingleton({ kind: store.kind, db: store.db as Kysely<unknown> }, 'test:alone', {
      holder: 'a',
      ttlMs: TTL,
      downMs,
      up: () => up,
      onAcquired: () => (acquired += 1),
      onLost: () => undefined,
    });
    try {
      await waitFor(() => a.held(), 'a holds it', 5_000);
      // Down for downMs: it stands down, so that another process could take it over.
      await waitFor(() => !a.held(), 'a stands down', downMs + 3 * TTL);
      const stoodDown = performance.now();
      // The platform is back; nobody else bids. A holder that stays out for its whole rest leaves
      // the connection unheld (the gateway closed) for downMs after its outage ended.
      up = true;
      await waitFor(() => a.held(), 'a holds it again', downMs);
      const gap = performance.now() - stoodDown;
      console.log(`stand-down with nobody to take over: held again after ${Math.round(gap)} ms (ttl ${TTL} ms, rest ${downMs} ms)`);
      expect(gap).toBeLessThan(3 * TTL);
      expect(acquired).toBe(2);
    } finally {
      await a.close();
    }
  }, 30_000);
});
