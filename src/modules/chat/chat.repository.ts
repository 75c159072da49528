import type { Kysely } from 'kysely';
import type { Database } from '../../schema.js';
import type { ChatSendRow, ChatSendUpdate } from './chat.table.js';

type Db = Kysely<Database>;

/** Insert a send unless its id exists; returns the row stored under the id either way. */
export async function insertSend(db: Db, row: Omit<ChatSendRow, 'attempts'>): Promise<{ row: ChatSendRow; created: boolean }> {
  const inserted = await db.insertInto('chat_sends').values(row).onConflict((oc) => oc.column('id').doNothing()).returningAll().executeTakeFirst();
  if (inserted !== undefined) return { row: inserted, created: true };
  return { row: await db.selectFrom('chat_sends').selectAll().where('id', '=', row.id).executeTakeFirstOrThrow(), created: false };
}

export async function findSend(db: Db, id: string): Promise<ChatSendRow | undefined> {
  return db.selectFrom('chat_sends').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Lease due sends: pending ones whose time has come, and in-flight ones whose lease expired. */
export async function claimDueSends(db: Db, owner: string, now: Date, leaseMs: number, limit: number): Promise<ChatSendRow[]> {
  return db
    .with('due', (qb) =>
      qb
        .selectFrom('chat_sends')
        .select('id')
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
    .updateTable('chat_sends')
    .from('due')
    .whereRef('chat_sends.id', '=', 'due.id')
    .set((eb) => ({ status: 'in_flight', lease_owner: owner, lease_expires_at: new Date(now.getTime() + leaseMs), attempts: eb('chat_sends.attempts', '+', 1) }))
    .returningAll('chat_sends')
    .execute();
}

/** Record an attempt's outcome, only under this owner's lease. */
export async function finishSend(db: Db, id: string, owner: string, update: ChatSendUpdate): Promise<boolean> {
  const r = await db
    .updateTable('chat_sends')
    .set({ ...update, lease_owner: null, lease_expires_at: null })
    .where('id', '=', id)
    .where('status', '=', 'in_flight')
    .where('lease_owner', '=', owner)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

export async function releaseSends(db: Db, owner: string, now: Date): Promise<number> {
  const r = await db
    .updateTable('chat_sends')
    .set({ status: 'pending', lease_owner: null, lease_expires_at: null, next_attempt_at: now })
    .where('status', '=', 'in_flight')
    .where('lease_owner', '=', owner)
    .executeTakeFirst();
  return Number(r.numUpdatedRows);
}

export async function pruneSends(db: Db, cutoff: Date): Promise<number> {
  const r = await db.deleteFrom('chat_sends').where('created_at', '<', cutoff).executeTakeFirst();
  return Number(r.numDeletedRows);
}
