import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireEditLock, recordAppliedSeq, releaseEditLock } from '../src/modules/deliveries/delivery.repository.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { migratedStore, type MigratedStore } from './support/db.js';

/**
 * An edit's seq is recorded only under the edit lease it was applied under: a process that stalled
 * after its edit left and before it recorded the seq, while another process took the edit lease over
 * and applied an older seq, must not record its newer seq over that one (the message shows the older
 * edit; a recorded newer seq would make a re-drive of the newer one think it applied, and leave it).
 */
describe('recording an edit’s applied seq', () => {
  let fixture: MigratedStore;
  const db = () => tablesOf<DeliveriesDb>(fixture.store.db);
  const t0 = new Date('2026-12-06T12:00:00Z');
  const at = (ms: number) => new Date(t0.getTime() + ms);

  beforeAll(async () => {
    fixture = await migratedStore();
  }, 60_000);
  afterAll(async () => {
    await fixture?.close();
  });

  it('a holder whose edit lease was taken over records nothing; the one holding it does (old code: the stale seq is recorded)', async () => {
    await db()
      .insertInto('deliveries')
      .values({ request_id: 'orig', kind: 'post', target: '{"guild_id":"1","destination":"alerts"}', body: '{"content":"v1"}', payload_hash: 'h', status: 'delivered', created_at: t0, next_attempt_at: t0, last_applied_seq: 2 } as never)
      .execute();
    // p1 applies seq 5 under its edit lease, then stalls before recording it.
    expect(await acquireEditLock(db(), 'orig', 'p1', at(0), 5_000, 5_000)).toEqual({ last_applied_seq: 2, last_applied_by: null });
    // Its lease expired and settled; p2 takes it over and applies seq 3 (the message now shows seq 3).
    expect(await acquireEditLock(db(), 'orig', 'p2', at(11_000), 5_000, 5_000)).toEqual({ last_applied_seq: 2, last_applied_by: null });
    expect(await recordAppliedSeq(db(), 'orig', 3, 'e3', 'p2')).toBe(true);
    await releaseEditLock(db(), 'orig', 'p2');
    // p1 carries on: its seq is not recorded.
    const stale = await recordAppliedSeq(db(), 'orig', 5, 'e5', 'p1');
    const row = await db().selectFrom('deliveries').select(['last_applied_seq', 'last_applied_by']).where('request_id', '=', 'orig').executeTakeFirstOrThrow();
    expect(row).toEqual({ last_applied_seq: 3, last_applied_by: 'e3' });
    expect(stale).toBe(false);
  });

  it('names the edit that recorded the highest seq: a lower seq applied later records nothing new, an equal one names itself', async () => {
    await db().updateTable('deliveries').set({ last_applied_seq: null, last_applied_by: null }).where('request_id', '=', 'orig').execute();
    const applied = async (seq: number, edit: string) => {
      expect(await acquireEditLock(db(), 'orig', edit, at(20_000), 5_000, 5_000)).toBeDefined();
      expect(await recordAppliedSeq(db(), 'orig', seq, edit, edit)).toBe(true);
      await releaseEditLock(db(), 'orig', edit);
      return db().selectFrom('deliveries').select(['last_applied_seq', 'last_applied_by']).where('request_id', '=', 'orig').executeTakeFirstOrThrow();
    };
    expect(await applied(4, 'e4')).toEqual({ last_applied_seq: 4, last_applied_by: 'e4' });
    expect(await applied(2, 'e2')).toEqual({ last_applied_seq: 4, last_applied_by: 'e4' });
    expect(await applied(4, 'f4')).toEqual({ last_applied_seq: 4, last_applied_by: 'f4' });
    expect(await applied(6, 'e6')).toEqual({ last_applied_seq: 6, last_applied_by: 'e6' });
  });
});
