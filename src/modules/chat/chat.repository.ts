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

/** How far back another send may have created a message this one's proof could mistake for its own. */
const TWIN_LOOKBACK_MS = 10 * 60_000;

/** Of `messageIds`, those another chat send in the same channel recorded as its own. */
export async function takenMessageIds(db: Db, row: ChatSendRow, messageIds: readonly string[]): Promise<Set<string>> {
  if (messageIds.length === 0) return new Set();
  const others = await db
    .selectFrom('chat_sends')
    .select('message_ids')
    .where('transport', '=', row.transport)
    .where('channel', '=', row.channel)
    .where('id', '!=', row.id)
    .where('message_ids', 'is not', null)
    .where('created_at', '>=', new Date(row.created_at.getTime() - TWIN_LOOKBACK_MS))
    .execute();
  const wanted = new Set(messageIds);
  const taken = new Set<string>();
  for (const o of others) for (const id of JSON.parse(o.message_ids ?? '[]') as string[]) if (wanted.has(id)) taken.add(id);
  return taken;
}

/** Whether another send of the same text, by the same sender to the same channel, is not settled with its ids. */
export async function hasUnsettledTwin(db: Db, row: ChatSendRow): Promise<boolean> {
  const twin = await db
    .selectFrom('chat_sends')
    .select('id')
    .where('transport', '=', row.transport)
    .where('channel', '=', row.channel)
    .where('sender', '=', row.sender)
    .where('text', '=', row.text)
    .where('id', '!=', row.id)
    .where('message_ids', 'is', null)
    .where('status', 'in', ['pending', 'in_flight', 'unconfirmed'])
    .where('created_at', '>=', new Date(row.created_at.getTime() - TWIN_LOOKBACK_MS))
    .executeTakeFirst();
  return twin !== undefined;
}
