import { sql, type Kysely } from 'kysely';
import type { HandoffsDb } from './handoff.table.js';
import type { HandoffInboxRow, NewHandoffInboxRow } from './handoff.table.js';

type Db = Kysely<HandoffsDb>;

/**
 * One advisory lock key for every receipt of a handoff, on every replica: the replay, capacity and
 * rate decisions of one receipt see every earlier receipt's, so two replicas seeing the same
 * message (or ten messages from one source at once) decide as one process would.
 */
const RECEIPT_LOCK = 0x48414e44; // "HAND"

export interface ReceiptLimits {
  /** Live replay entries at most: when full, a new handoff is refused (never an entry evicted early). */
  capacity: number;
  /** Accepted handoffs per source bot per window. */
  rateLimit: number;
  rateWindowMs: number;
}

/**
 * `sameMessage` on a replay: the event was recorded from this very message (it is being seen
 * again: by a catch-up sweep, or a retry whose first answer was lost), not replayed by another one.
 */
export type ReceiptOutcome = { outcome: 'accepted'; inboxId: string } | { outcome: 'replay'; sameMessage: boolean } | { outcome: 'replay_capacity' | 'rate_limited' };

/**
 * Take in a validated envelope, atomically: drop replay entries that expired, refuse an event_id
 * already seen (a replay, from any replica), refuse when the live entries reach the capacity (fail
 * closed), then write the replay record, and only then check the source's rate (as the handoff protocol does:
 * a rate-limited handoff's event_id is spent, so re-sending it is a replay, not a second chance).
 * An accepted one goes to the inbox in the same transaction.
 */
export async function recordReceipt(db: Db, entry: NewHandoffInboxRow, now: Date, limits: ReceiptLimits): Promise<ReceiptOutcome> {
  return db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(${RECEIPT_LOCK})`.execute(trx);
    await trx.deleteFrom('handoff_events').where('expires_at', '<=', now).execute();
    const seen = await trx.selectFrom('handoff_events').select('message_id').where('event_id', '=', entry.event_id).executeTakeFirst();
    if (seen !== undefined) return { outcome: 'replay' as const, sameMessage: seen.message_id === entry.handoff_message_id };
    const live = await trx.selectFrom('handoff_events').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    if (Number(live.n) >= limits.capacity) return { outcome: 'replay_capacity' as const };
    await trx
      .insertInto('handoff_events')
      .values({ event_id: entry.event_id, source_bot_id: entry.source_bot_id, outcome: 'accepted', received_at: now, expires_at: entry.expires_at, message_id: entry.handoff_message_id })
      .execute();
    const recent = await trx
      .selectFrom('handoff_events')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('source_bot_id', '=', entry.source_bot_id)
      .where('outcome', '=', 'accepted')
      .where('received_at', '>', new Date(now.getTime() - limits.rateWindowMs))
      .where('event_id', '<>', entry.event_id)
      .executeTakeFirstOrThrow();
    if (Number(recent.n) >= limits.rateLimit) {
      await trx.updateTable('handoff_events').set({ outcome: 'rate_limited' }).where('event_id', '=', entry.event_id).execute();
      return { outcome: 'rate_limited' as const };
    }
    const inserted = await trx.insertInto('handoff_inbox').values(entry).returning(sql<string>`id::text`.as('id')).executeTakeFirstOrThrow();
    return { outcome: 'accepted' as const, inboxId: inserted.id };
  });
}

const inboxColumns = [
  sql<string>`id::text`.as('id'),
  'event_id',
  'source_bot_id',
  'origin_channel_id',
  'origin_thread_id',
  'origin_message_id',
  'handoff_message_id',
  'text',
  'received_at',
  'expires_at',
  'acknowledged_at',
] as const;

/** Unacknowledged handoffs after the cursor, oldest first. */
export async function listInbox(db: Db, after: string, limit: number): Promise<HandoffInboxRow[]> {
  return db
    .selectFrom('handoff_inbox')
    .select(inboxColumns)
    .where('acknowledged_at', 'is', null)
    .where(sql<boolean>`id > ${after}::bigint`)
    .orderBy('handoff_inbox.id')
    .limit(limit)
    .execute();
}

/** Accepted handoffs after the cursor, acknowledged or not, oldest first (the inbound inbox takes them in). */
export async function acceptedSince(db: Db, after: string, limit: number): Promise<HandoffInboxRow[]> {
  return db.selectFrom('handoff_inbox').select(inboxColumns).where(sql<boolean>`id > ${after}::bigint`).orderBy('handoff_inbox.id').limit(limit).execute();
}

/** Mark these handoffs read; how many were not acknowledged before. */
export async function acknowledge(db: Db, ids: readonly string[], now: Date): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await db
    .updateTable('handoff_inbox')
    .set({ acknowledged_at: now })
    .where(sql<boolean>`id = any(${[...ids]}::bigint[])`)
    .where('acknowledged_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Drop acknowledged handoffs acknowledged before `cutoff`. */
export async function pruneInbox(db: Db, cutoff: Date): Promise<number> {
  const result = await db.deleteFrom('handoff_inbox').where('acknowledged_at', '<', cutoff).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** Catch-up progress of these channels (channel id → the message every one up to was settled). */
export async function catchupCursors(db: Db, channelIds: readonly string[]): Promise<Map<string, string>> {
  if (channelIds.length === 0) return new Map();
  const rows = await db.selectFrom('handoff_catchup').select(['channel_id', 'after_id']).where('channel_id', 'in', [...channelIds]).execute();
  return new Map(rows.map((r) => [r.channel_id, r.after_id]));
}

/** Every message of the channel up to `afterId` is settled. */
export async function saveCatchupCursor(db: Db, channelId: string, afterId: string, now: Date): Promise<void> {
  await db
    .insertInto('handoff_catchup')
    .values({ channel_id: channelId, after_id: afterId, updated_at: now })
    .onConflict((oc) => oc.column('channel_id').doUpdateSet({ after_id: afterId, updated_at: now }))
    .execute();
}

/** Drop progress not advanced since `cutoff` (older than any unexpired handoff: a sweep starts past it anyway). */
export async function pruneCatchupCursors(db: Db, cutoff: Date): Promise<number> {
  const result = await db.deleteFrom('handoff_catchup').where('updated_at', '<', cutoff).executeTakeFirst();
  return Number(result.numDeletedRows);
}
