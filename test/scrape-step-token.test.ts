import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertScrape, recordStep, recordStepFailure } from '../src/modules/archive/archive.repository.js';
import type { ArchiveDb } from '../src/modules/archive/archive.table.js';
import { claimScrapes } from '../src/modules/archive/scrape.queue.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { migratedStore, type MigratedStore } from './support/db.js';

/**
 * A scrape step writes its outcome only under its own claim (the lease token the claim wrote), as a
 * delivery does: a step of this same worker that stalled past its lease, while the worker claimed the
 * scrape again, must not write its stale cursor and counts over the new step's (old code: the owner
 * alone decided, and both steps' writes passed).
 */
describe('a scrape step’s write under its claim', () => {
  let fixture: MigratedStore;
  const db = () => tablesOf<ArchiveDb>(fixture.store.db);
  const t0 = new Date('2026-12-06T12:00:00Z');
  const at = (ms: number) => new Date(t0.getTime() + ms);
  const step = (cursor: string, now: Date) => ({ cursor, messages: 10, items: 1, errors: 0, lastError: null, done: false, nextAt: now, now });

  beforeAll(async () => {
    fixture = await migratedStore();
  }, 60_000);
  afterAll(async () => {
    await fixture?.close();
  });

  it('the earlier claim of the same worker writes nothing; the current one does', async () => {
    await insertScrape(db(), { id: 's1', channelId: '123456', channelName: null, guildId: null, mode: 'links', now: t0 });
    const [first] = await claimScrapes(db(), 'w', at(0), 1_000, 1);
    // Its step stalls past the lease; the same worker claims the scrape again.
    const [second] = await claimScrapes(db(), 'w', at(2_000), 1_000, 1);
    expect(first?.lease_token).toBeTruthy();
    expect(second?.lease_token).toBeTruthy();
    expect(second?.lease_token).not.toBe(first?.lease_token);
    const stale = { owner: 'w', token: first?.lease_token ?? null };
    const current = { owner: 'w', token: second?.lease_token ?? null };
    expect(await recordStepFailure(db(), 's1', stale, { error: 'stale', nextAt: at(2_100), fail: false, now: at(2_100) })).toBeUndefined();
    expect(await recordStep(db(), 's1', stale, step('stale-cursor', at(2_100)))).toBeUndefined();
    const recorded = await recordStep(db(), 's1', current, step('new-cursor', at(2_200)));
    expect(recorded?.cursor).toBe('new-cursor');
    expect(recorded?.messages_seen).toBe(10);
  });
});
