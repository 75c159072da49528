import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import type { DeliveryRow, DeliveryUpdate, NewDeliveryRow } from './delivery.table.js';

/** Wakes dispatchers (LISTEN/NOTIFY) when a delivery becomes due; delivered at commit. */
export const DELIVERY_CHANNEL = 'herald_deliveries';

type Db = Kysely<Database>;

export async function insertDelivery(db: Db, row: NewDeliveryRow): Promise<DeliveryRow | undefined> {
  return db
    .insertInto('deliveries')
    .values(row)
    .onConflict((oc) => oc.column('request_id').doNothing())
    .returningAll()
    .executeTakeFirst();
}

export async function findDelivery(db: Db, requestId: string): Promise<DeliveryRow | undefined> {
  return db.selectFrom('deliveries').selectAll().where('request_id', '=', requestId).executeTakeFirst();
}

export async function lockDelivery(db: Db, requestId: string): Promise<DeliveryRow | undefined> {
  return db.selectFrom('deliveries').selectAll().where('request_id', '=', requestId).forUpdate().executeTakeFirst();
}

export async function notifyDue(db: Db): Promise<void> {
  await sql`select pg_notify(${DELIVERY_CHANNEL}, '')`.execute(db);
}

/** Make a failed or in-doubt delivery due again, keeping its payload, created_at and first attempt. */
export async function resetToPending(db: Db, requestId: string, now: Date): Promise<DeliveryRow> {
  return db
    .updateTable('deliveries')
    .set({ status: 'pending', failure_code: null, next_attempt_at: now, attempts: 0, lease_owner: null, lease_expires_at: null })
    .where('request_id', '=', requestId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Lease up to `limit` due deliveries: pending ones whose time has come, and in-flight ones whose
 * lease expired (their dispatcher died: they read as `unknown` until re-driven here).
 */
export async function claimDue(db: Db, owner: string, now: Date, leaseMs: number, limit: number): Promise<DeliveryRow[]> {
  return db
    .with('due', (qb) =>
      qb
        .selectFrom('deliveries')
        .select('request_id')
        .where((eb) =>
          eb.or([
            eb.and([eb('status', '=', 'pending'), eb('next_attempt_at', '<=', now)]),
            eb.and([eb('status', '=', 'in_flight'), eb('lease_expires_at', '<=', now)]),
          ]),
        )
        .orderBy('next_attempt_at')
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .updateTable('deliveries')
    .from('due')
    .whereRef('deliveries.request_id', '=', 'due.request_id')
    .set((eb) => ({
      status: 'in_flight',
      lease_owner: owner,
      lease_expires_at: new Date(now.getTime() + leaseMs),
      attempts: eb('deliveries.attempts', '+', 1),
      // The earliest moment a message for this delivery may have been created: reconciliation's lower bound.
      first_attempt_at: eb.fn.coalesce('deliveries.first_attempt_at', eb.val(now)),
    }))
    .returningAll('deliveries')
    .execute();
}

/** Finish an attempt, only if this dispatcher still holds the lease. Returns false if it lost it. */
export async function finishAttempt(db: Db, requestId: string, owner: string, update: DeliveryUpdate): Promise<boolean> {
  const result = await db
    .updateTable('deliveries')
    .set({ ...update, lease_owner: null, lease_expires_at: null })
    .where('request_id', '=', requestId)
    .where('status', '=', 'in_flight')
    .where('lease_owner', '=', owner)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** On shutdown: hand this process's in-flight deliveries back, due now. */
export async function releaseLeases(db: Db, owner: string, now: Date): Promise<number> {
  const result = await db
    .updateTable('deliveries')
    .set({ status: 'pending', lease_owner: null, lease_expires_at: null, next_attempt_at: now })
    .where('status', '=', 'in_flight')
    .where('lease_owner', '=', owner)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Drop records created before `cutoff` (the protocol keeps them 8 days). */
export async function pruneDeliveries(db: Db, cutoff: Date): Promise<number> {
  const result = await db.deleteFrom('deliveries').where('created_at', '<', cutoff).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** Whether another delivery already recorded this Discord message as its own. */
export async function isMessageRecorded(db: Db, messageId: string, exceptRequestId: string): Promise<boolean> {
  const row = await db
    .selectFrom('deliveries')
    .select('request_id')
    .where('message_id', '=', messageId)
    .where('request_id', '<>', exceptRequestId)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Take the edit lease on an original so its edits apply one at a time across every process.
 * Returns the original's last applied seq, or undefined when another edit holds it.
 */
export async function acquireEditLock(db: Db, originalId: string, holder: string, now: Date, leaseMs: number): Promise<{ last_applied_seq: number | null } | undefined> {
  return db
    .updateTable('deliveries')
    .set({ edit_lock_owner: holder, edit_lock_expires_at: new Date(now.getTime() + leaseMs) })
    .where('request_id', '=', originalId)
    .where((eb) => eb.or([eb('edit_lock_owner', 'is', null), eb('edit_lock_expires_at', '<=', now)]))
    .returning('last_applied_seq')
    .executeTakeFirst();
}

export async function releaseEditLock(db: Db, originalId: string, holder: string): Promise<void> {
  await db
    .updateTable('deliveries')
    .set({ edit_lock_owner: null, edit_lock_expires_at: null })
    .where('request_id', '=', originalId)
    .where('edit_lock_owner', '=', holder)
    .execute();
}

/** Remember durably that an edit with this seq was applied to the original. */
export async function recordAppliedSeq(db: Db, originalId: string, seq: number): Promise<void> {
  await db
    .updateTable('deliveries')
    .set((eb) => ({ last_applied_seq: sql<number>`greatest(${eb.ref('last_applied_seq')}, ${seq})` }))
    .where('request_id', '=', originalId)
    .execute();
}
