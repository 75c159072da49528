import { sql, type CompiledQuery, type Kysely } from 'kysely';
import { ClaimCursor, jsonText, LeasedTable } from '../../outbox/leased-table.js';
import type { LaneRoom } from '../../outbox/lanes.js';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import type { Lease } from '../../outbox/worker.js';
import type { DeliveriesDb } from './delivery.table.js';
import { twinLane, yieldTwins } from './delivery.twins.js';
import type { StoredKind as DeliveryKind } from './delivery.js';
import type { DeliveryRow, DeliveryStatus, DeliveryUpdate, NewDeliveryRow } from './delivery.table.js';

type Db = Kysely<DeliveriesDb>;

/**
 * What one row of an insert came to: `true`, inserted; a row, the delivery already stored under its
 * request_id (read by the same statement, and the answer for every twin of it in the batch too);
 * `undefined`, neither (an earlier twin in the batch inserted the id, or another session's insert of
 * it had not committed when the statement began: read again).
 */
export type InsertOutcome = true | DeliveryRow | undefined;

/**
 * Insert new deliveries in one autocommit statement, which also reads the rows already stored
 * under the request_ids it could not insert: a repeat is answered by this one statement, not by an
 * INSERT and then a SELECT. The read sees the store as the statement began, so never the rows the
 * statement inserts (PostgreSQL's rule for data-modifying WITH): each id is either inserted or read.
 */
export async function insertDeliveries(db: Db, rows: readonly NewDeliveryRow[]): Promise<InsertOutcome[]> {
  const first = new Map<string, number>();
  rows.forEach((r, i) => first.has(r.request_id) || first.set(r.request_id, i));
  const unique = rows.filter((r, i) => first.get(r.request_id) === i);
  const stored = db.selectFrom('deliveries').selectAll().where('request_id', 'in', [...first.keys()]).as('stored');
  const found = await db
    .with('inserted', (qb) => qb.insertInto('deliveries').values(unique).onConflict((oc) => oc.column('request_id').doNothing()).returning('request_id'))
    .selectFrom('inserted')
    .fullJoin(stored, (join) => join.onRef('stored.request_id', '=', 'inserted.request_id'))
    .select('inserted.request_id as inserted_id')
    .selectAll('stored')
    .execute();
  const ids = new Set<string>();
  const existing = new Map<string, DeliveryRow>();
  for (const { inserted_id: insertedId, ...row } of found) {
    if (insertedId !== null) ids.add(insertedId);
    else if (row.request_id !== null) existing.set(row.request_id, row as DeliveryRow);
  }
  // A twin of a stored id gets the row read for it (a connector's retries in flight at once are
  // answered by one statement, not one a statement); a twin of an id inserted now reads it again.
  return rows.map((r, i) => (ids.has(r.request_id) ? (first.get(r.request_id) === i ? true : undefined) : existing.get(r.request_id)));
}

/** The read of one delivery, compiled once for each database handle. */
const findCompiled = new WeakMap<Db, CompiledQuery<DeliveryRow>>();

/**
 * One delivery by its request_id. A GET runs this on every request, and building and compiling
 * Kysely's query tree each time cost about 12 µs of CPU a read (profiled under a GET load): the
 * statement is compiled once for each handle and run with each id.
 */
export async function findDelivery(db: Db, requestId: string): Promise<DeliveryRow | undefined> {
  let compiled = findCompiled.get(db);
  if (compiled === undefined) {
    compiled = db.selectFrom('deliveries').selectAll().where('request_id', '=', '').compile() as CompiledQuery<DeliveryRow>;
    findCompiled.set(db, compiled);
  }
  const { rows } = await db.executeQuery<DeliveryRow>({ ...compiled, parameters: [requestId] });
  return rows[0];
}

/**
 * Several deliveries by request_id in one statement, answered in the order asked (undefined: none
 * stored; an id asked twice gets the same row). One id is the single read.
 */
export async function findDeliveries(db: Db, requestIds: readonly string[]): Promise<(DeliveryRow | undefined)[]> {
  if (requestIds.length === 1) return [await findDelivery(db, requestIds[0] ?? '')];
  const rows = await db.selectFrom('deliveries').selectAll().where('request_id', 'in', [...new Set(requestIds)]).execute();
  const byId = new Map(rows.map((r) => [r.request_id, r]));
  return requestIds.map((id) => byId.get(id));
}

/** Whether a `delete` of this message (by its message_ref) was delivered: an edit of it then fails NOT_FOUND. */
export async function deletedByHerald(db: Db, messageRef: string): Promise<boolean> {
  const row = await db
    .selectFrom('deliveries')
    .select('request_id')
    .where('kind', '=', 'delete')
    .where('status', '=', 'delivered')
    .where(jsonText('target', 'message_ref'), '=', messageRef)
    .executeTakeFirst();
  return row !== undefined;
}

export async function lockDelivery(db: Db, requestId: string): Promise<DeliveryRow | undefined> {
  return db.selectFrom('deliveries').selectAll().where('request_id', '=', requestId).forUpdate().executeTakeFirst();
}

/**
 * An in-flight row whose attempt is being abandoned (its lease expired, or it is handed back) may
 * have created a message any time from its start to its lease's end: widen the doubt window to
 * cover it. Edits are idempotent and never in doubt. Other rows keep their window as it is.
 */
const abandonedAttemptDoubt = {
  doubt_from: sql<Date | null>`case when deliveries.status = 'in_flight' and deliveries.kind <> 'edit'
    then coalesce(deliveries.doubt_from, deliveries.attempt_started_at, deliveries.created_at)
    else deliveries.doubt_from end`,
  doubt_until: sql<Date | null>`case when deliveries.status = 'in_flight' and deliveries.kind <> 'edit'
    then greatest(deliveries.doubt_until, deliveries.lease_expires_at)
    else deliveries.doubt_until end`,
};

/**
 * Make a failed or in-doubt delivery due again, keeping its payload, created_at and its doubt
 * window: a create that may have happened stays in doubt across resets, so the next attempt
 * reconciles (or relies on the nonce) instead of sending blindly.
 */
export async function resetToPending(db: Db, requestId: string, now: Date): Promise<DeliveryRow> {
  return db
    .updateTable('deliveries')
    .set({
      ...abandonedAttemptDoubt,
      status: 'pending',
      failure_code: null,
      reason: null,
      next_attempt_at: now,
      attempts: 0,
      lease_owner: null,
      lease_token: null,
      lease_expires_at: null,
    })
    .where('request_id', '=', requestId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * What gives a delivery a lane (src/outbox/lanes.ts): what paces its sends together.
 * - A chat send on a platform that paces each sender's lines on a connection of its own (IRC)
 *   waits for that sender's other sends: its lane is the platform and the sender (as the
 *   connection is keyed: a nick in lower case).
 * - With several identities (`byIdentity`), every other row is its identity's: each bot has its own
 *   rate limits and budget, so one bot's backlog (a 429 storm, a slow channel) holds at most its
 *   lane's share of the pool, never another bot's slots (`npm run bench -- --only=identities`).
 * Otherwise a row has none.
 */
export interface DeliveryLanes {
  readonly pacedBySender: readonly string[];
  readonly byIdentity: boolean;
}

/**
 * The deliveries queue: due are pending deliveries whose time has come, and in-flight ones whose
 * lease expired (their dispatcher died: they read as `unknown` until re-driven). A claim records
 * when the attempt started and widens the doubt of an abandoned attempt; so does a release.
 */
function deliveriesTable(db: Db, lanes: DeliveryLanes = { pacedBySender: [], byIdentity: false }): LeasedTable<DeliveryRow> {
  // Read with jsonText: a claim must not fail on one row's json (src/outbox/leased-table.ts).
  const bySender = lanes.pacedBySender.length > 0 ? sql`when kind = 'chat' and ${jsonText('target', 'transport')} in (${sql.join(lanes.pacedBySender)}) then ${jsonText('target', 'transport')} || ' ' || lower(${jsonText('target', 'sender')})` : undefined;
  const byIdentity = lanes.byIdentity ? sql`else 'as ' || coalesce(identity, ${DEFAULT_IDENTITY})` : sql``;
  return new LeasedTable<DeliveryRow>(db as unknown as Kysely<unknown>, {
    ...(bySender !== undefined || lanes.byIdentity ? { lane: sql`case ${bySender ?? sql`when false then null`} ${byIdentity} end` } : {}),
    table: 'deliveries',
    key: 'request_id',
    orderBy: 'next_attempt_at',
    due: (now) => sql`(status = 'pending' and next_attempt_at <= ${now}) or (status = 'in_flight' and lease_expires_at <= ${now})`,
    // Read through deliveries_due alone, in its order, from the cursor on.
    dueFrom: (now, from) => sql`status = 'pending' and next_attempt_at >= ${from} and next_attempt_at <= ${now}`,
    // The status before the claim: in_flight means an expired lease (metrics count those).
    claimedFrom: 'status',
    // A re-claimed expired lease: its owner died mid-attempt, perhaps after Discord created the message.
    onClaim: (now) => ({ ...abandonedAttemptDoubt, status: sql`'in_flight'`, attempt_started_at: sql`${now}` }),
    held: sql`status = 'in_flight'`,
    onRelease: (now) => ({ ...abandonedAttemptDoubt, status: sql`'pending'`, next_attempt_at: sql`${now}` }),
  });
}

export interface ClaimOptions {
  cursor?: ClaimCursor;
  lanes?: { room: LaneRoom; rule: DeliveryLanes };
  /**
   * False on a store of one session (PGlite): its statements run one at a time, each claim on a
   * snapshot holding every earlier commit, so no twin can become due during a claim and the claims
   * need no second statement to hand twins back. True (the default) on PostgreSQL.
   */
  claimsOverlap?: boolean;
}

/**
 * Lease up to `limit` due deliveries of these kinds. Twins take turns (delivery.twins.ts): a row
 * whose twin is in flight, waiting ahead of it or recently in doubt is left due, and a row whose twin
 * another claim took meanwhile is handed back untouched.
 */
export async function claimDue(db: Db, owner: string, now: Date, leaseMs: number, kinds: readonly DeliveryKind[], limit: number, options: ClaimOptions = {}): Promise<(DeliveryRow & { claimed_from: DeliveryStatus; lane?: string | null })[]> {
  if (kinds.length === 0) return [];
  const { cursor, lanes } = options;
  const where = sql`kind in (${sql.join(kinds)}) and ${twinLane(now)}`;
  const rows = await deliveriesTable(db, lanes?.rule).claim(owner, now, leaseMs, limit, where, cursor !== undefined ? { at: cursor, scope: kinds.join(',') } : undefined, lanes?.room);
  const claimed = rows.map((r) => ({ ...r, claimed_from: r.claimed_from as DeliveryStatus }));
  if (options.claimsOverlap === false) return claimed;
  const yielded = await yieldTwins(db, owner, now, claimed);
  return yielded.size === 0 ? claimed : claimed.filter((r) => !yielded.has(r.request_id));
}

/** Since when the oldest due delivery has been due (null: none is). */
export function oldestDueDelivery(db: Db, now: Date): Promise<Date | null> {
  return deliveriesTable(db).oldestDue(now);
}

/** Finish an attempt, only under the claim that holds the lease (src/outbox/leased-table.ts). Returns false if it lost it. */
export function finishAttempt(db: Db, requestId: string, lease: Lease, update: DeliveryUpdate): Promise<boolean> {
  return deliveriesTable(db).finish(requestId, lease, update);
}

/** On shutdown: hand this process's in-flight deliveries back, due now. */
export function releaseLeases(db: Db, owner: string, now: Date): Promise<number> {
  return deliveriesTable(db).release(owner, now);
}

/** Drop records created before `cutoff` (the protocol keeps them 8 days). */
export async function pruneDeliveries(db: Db, cutoff: Date): Promise<number> {
  const removed = await deliveriesTable(db).prune(cutoff);
  await db.deleteFrom('sent_messages').where('created_at', '<', cutoff).execute();
  return removed;
}

/** Which of these platform messages other deliveries already recorded as their own. */
export async function recordedMessages(db: Db, messageIds: readonly string[], exceptRequestId: string): Promise<Set<string>> {
  if (messageIds.length === 0) return new Set();
  const rows = await db
    .selectFrom('deliveries')
    .select('message_id')
    .where('message_id', 'in', messageIds)
    .where('request_id', '<>', exceptRequestId)
    .execute();
  return new Set(rows.map((r) => r.message_id ?? ''));
}

/** The kinds whose send creates a message of Herald's own (their message_id is Herald's message). */
export const POSTING_KINDS: readonly DeliveryKind[] = ['post', 'dm', 'reply', 'handoff', 'chat'];

/** Which of these platform messages Herald posted: recorded on a posting delivery, or reported by the platform as its own. */
export async function heraldMessages(db: Db, messageIds: readonly string[]): Promise<Set<string>> {
  if (messageIds.length === 0) return new Set();
  // Only a send that created a message: an edit, a reaction or a delete keeps the id of a message
  // it acted on (a person's, for a reaction), which Herald did not post.
  const delivered = await db.selectFrom('deliveries').select('message_id').where('message_id', 'in', messageIds).where('kind', 'in', POSTING_KINDS).execute();
  const reported = await db.selectFrom('sent_messages').select('message_id').where('message_id', 'in', messageIds).execute();
  return new Set([...delivered, ...reported].map((r) => r.message_id ?? ''));
}

/** Rows of one kind, other than `requestId`, created since `since` (a chat send's proof reads its siblings). */
export async function findRecentOfKind(db: Db, kind: DeliveryKind, requestId: string, since: Date): Promise<DeliveryRow[]> {
  return db.selectFrom('deliveries').selectAll().where('kind', '=', kind).where('request_id', '<>', requestId).where('created_at', '>=', since).execute();
}

/**
 * Other unresolved deliveries with the same body that may have created a message between `from`
 * and `until` (in flight since before `until`, or in doubt over an overlapping window). While one
 * exists, a matching message in the channel cannot be told apart from that delivery's.
 */
export async function findUnresolvedTwins(db: Db, requestId: string, from: Date, until: Date): Promise<Pick<DeliveryRow, 'request_id' | 'status' | 'lease_expires_at' | 'doubt_from'>[]> {
  return db
    .selectFrom('deliveries as d')
    .select(['d.request_id', 'd.status', 'd.lease_expires_at', 'd.doubt_from'])
    .where('d.request_id', '<>', requestId)
    .where('d.kind', '<>', 'edit')
    .where('d.status', '<>', 'delivered')
    .where((eb) =>
      eb.or([
        eb.and([eb('d.status', '=', 'in_flight'), eb(eb.fn.coalesce('d.attempt_started_at', 'd.created_at'), '<=', until)]),
        eb.and([eb('d.doubt_from', 'is not', null), eb('d.doubt_from', '<=', until), eb('d.doubt_until', '>=', from)]),
      ]),
    )
    // The same body to the same target (so the same channel), as the same identity (the same author).
    .where(sql<boolean>`(d.body::text, d.target::text) = (select o.body::text, o.target::text from deliveries o where o.request_id = ${requestId})`)
    .where(sql<boolean>`d.identity is not distinct from (select o.identity from deliveries o where o.request_id = ${requestId})`)
    .limit(20)
    .execute();
}

/**
 * Take the edit lease on an original so its edits apply one at a time across every process.
 * Returns the original's last applied seq, or undefined when another edit holds it. A lease its
 * holder gave back is free at once; one that expired only `settleMs` after it ended (an edit its
 * holder sent may still be landing).
 */
export async function acquireEditLock(db: Db, originalId: string, holder: string, now: Date, leaseMs: number, settleMs = 0): Promise<{ last_applied_seq: number | null; last_applied_by: string | null } | undefined> {
  return db
    .updateTable('deliveries')
    .set({ edit_lock_owner: holder, edit_lock_expires_at: new Date(now.getTime() + leaseMs) })
    .where('request_id', '=', originalId)
    .where((eb) => eb.or([eb('edit_lock_owner', 'is', null), eb('edit_lock_expires_at', '<=', new Date(now.getTime() - settleMs))]))
    .returning(['last_applied_seq', 'last_applied_by'])
    .executeTakeFirst();
}

/** Extend the edit lease while its holder is still applying; false when it was lost. */
export async function renewEditLock(db: Db, originalId: string, holder: string, now: Date, ttlMs: number): Promise<boolean> {
  const result = await db
    .updateTable('deliveries')
    .set({ edit_lock_expires_at: new Date(now.getTime() + ttlMs) })
    .where('request_id', '=', originalId)
    .where('edit_lock_owner', '=', holder)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function releaseEditLock(db: Db, originalId: string, holder: string): Promise<void> {
  await db
    .updateTable('deliveries')
    .set({ edit_lock_owner: null, edit_lock_expires_at: null })
    .where('request_id', '=', originalId)
    .where('edit_lock_owner', '=', holder)
    .execute();
}

/**
 * Remember durably that the edit `editId`, with this seq, was applied to the original, only while
 * `holder` still holds the original's edit lease (false: another edit took it over meanwhile,
 * nothing recorded). The edit is named only when its seq is the highest applied.
 */
export async function recordAppliedSeq(db: Db, originalId: string, seq: number, editId: string, holder: string): Promise<boolean> {
  const result = await db
    .updateTable('deliveries')
    .set((eb) => ({
      last_applied_seq: sql<number>`greatest(${eb.ref('last_applied_seq')}, ${seq})`,
      last_applied_by: sql<string>`case when ${eb.ref('last_applied_seq')} > ${seq} then ${eb.ref('last_applied_by')} else ${editId} end`,
    }))
    .where('request_id', '=', originalId)
    .where('edit_lock_owner', '=', holder)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Remember which message a nonce created (the first report wins; a repeat changes nothing). */
export async function recordSentMessage(db: Db, nonce: string, channelId: string, messageId: string, createdAt: Date): Promise<void> {
  await db
    .insertInto('sent_messages')
    .values({ nonce, channel_id: channelId, message_id: messageId, created_at: createdAt })
    .onConflict((oc) => oc.column('nonce').doNothing())
    .execute();
}

/** The message a nonce created, if the platform reported it. */
export async function findSentMessage(db: Db, nonce: string): Promise<{ channel_id: string; message_id: string } | undefined> {
  return db.selectFrom('sent_messages').select(['channel_id', 'message_id']).where('nonce', '=', nonce).executeTakeFirst();
}

/** The nonces that created these messages, where the platform reported them. */
export async function sentMessageNonces(db: Db, messageIds: readonly string[]): Promise<Map<string, string>> {
  if (messageIds.length === 0) return new Map();
  const rows = await db.selectFrom('sent_messages').select(['message_id', 'nonce']).where('message_id', 'in', messageIds).execute();
  return new Map(rows.map((r) => [r.message_id, r.nonce]));
}

/** The gateway's nonce reports as a transport reads them (which message a nonce created). */
export function nonceLedger(db: Db): { find(nonce: string): Promise<{ channelId: string; messageId: string } | undefined>; noncesOf(messageIds: readonly string[]): Promise<Map<string, string>> } {
  return {
    find: async (nonce) => {
      const row = await findSentMessage(db, nonce);
      return row === undefined ? undefined : { channelId: row.channel_id, messageId: row.message_id };
    },
    noncesOf: (messageIds) => sentMessageNonces(db, messageIds),
  };
}

/** Deliveries waiting or being attempted, per kind and status, and since when the oldest is due. */
export interface OutboxDepthRow {
  kind: DeliveryKind;
  status: 'pending' | 'in_flight' | 'unknown';
  jobs: number;
  /** Pending: the earliest due time that has come; in flight: the earliest expired lease. Null: none due. */
  oldest_due_at: Date | null;
}

/**
 * The outbox at a glance, for metrics: one grouped read per status over its partial index (delivered
 * and failed rows, the bulk of the table, are never scanned). One statement, no transaction: on
 * PGlite a transaction holds the only connection.
 */
export async function outboxDepth(db: Db, now: Date): Promise<OutboxDepthRow[]> {
  const result = await sql<{ kind: DeliveryKind; status: OutboxDepthRow['status']; jobs: number | string; oldest_due_at: Date | string | null }>`
    select kind, 'pending' as status, count(*) as jobs, min(next_attempt_at) filter (where next_attempt_at <= ${now}) as oldest_due_at
      from deliveries where status = 'pending' group by kind
    union all
    select kind, 'in_flight', count(*), min(lease_expires_at) filter (where lease_expires_at <= ${now})
      from deliveries where status = 'in_flight' group by kind
    union all
    select kind, 'unknown', count(*), null
      from deliveries where status = 'unknown' group by kind`.execute(db);
  return result.rows.map((r) => ({
    kind: r.kind,
    status: r.status,
    jobs: Number(r.jobs),
    oldest_due_at: r.oldest_due_at === null ? null : new Date(r.oldest_due_at),
  }));
}
