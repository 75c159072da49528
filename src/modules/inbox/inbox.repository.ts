import { sql, type Kysely } from 'kysely';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import { LeasedTable } from '../../outbox/leased-table.js';
import type { InboxDb, InboxEventRow, InboxPushRow, NewInboxEventRow } from './inbox.table.js';

type Db = Kysely<InboxDb>;

/** The advisory lock key every insert into the inbox takes ("INBX"). */
const INSERT_LOCK = 0x494e4258;

const columns = [
  sql<string>`id::text`.as('id'),
  'event_id',
  'kind',
  'platform',
  'channel_id',
  'guild_id',
  'thread_id',
  'message_id',
  'author_id',
  'author_name',
  'author_bot',
  'reply_to',
  'content',
  'reaction',
  'attachments',
  'handoff',
  'source_ref',
  'created_at',
  'received_at',
  'identity',
] as const;

/**
 * Store an event once (by event_id), and its webhook push in the same transaction when pushes are
 * on. Undefined when it was stored before (by this replica, another, or an earlier sweep).
 */
export async function insertEvent(db: Db, event: NewInboxEventRow, push: boolean, now: Date): Promise<string | undefined> {
  return db.transaction().execute(async (trx) => {
    // One insert at a time across replicas: ids commit in the order they are drawn, so a reader
    // paging by id never passes one that commits later (it would never see it).
    await sql`select pg_advisory_xact_lock(${INSERT_LOCK})`.execute(trx);
    const row = await trx
      .insertInto('inbox_events')
      .values(event)
      .onConflict((oc) => oc.column('event_id').doNothing())
      .returning(sql<string>`id::text`.as('id'))
      .executeTakeFirst();
    if (row === undefined) return undefined;
    if (push) await trx.insertInto('inbox_pushes').values({ id: row.id, kind: PUSH_KIND, status: 'pending', next_attempt_at: now, created_at: now }).execute();
    return row.id;
  });
}

/**
 * Events after `after`, oldest first, as a reader speaking as `identity` may see them: every event
 * but those another bot heard said to it, and the default bot's DMs (inbox.scope.ts addressedTo).
 */
export async function listEvents(db: Db, after: string, limit: number, identity: string): Promise<InboxEventRow[]> {
  // By the column, not the text alias `id` (which would sort "10" before "9").
  return db
    .selectFrom('inbox_events')
    .select(columns)
    .where(sql<boolean>`id > ${after}::bigint`)
    .where((eb) => eb.or([eb('identity', '=', identity), eb('kind', '=', 'handoff'), eb.and([eb('guild_id', 'is not', null), eb('identity', '=', DEFAULT_IDENTITY)])]))
    .orderBy('inbox_events.id')
    .limit(limit)
    .execute();
}

export async function findEvent(db: Db, id: string): Promise<InboxEventRow | undefined> {
  return db.selectFrom('inbox_events').select(columns).where(sql<boolean>`id = ${id}::bigint`).executeTakeFirst();
}

export async function newestId(db: Db): Promise<string> {
  const row = await db.selectFrom('inbox_events').select(sql<string>`coalesce(max(id), 0)::text`.as('id')).executeTakeFirstOrThrow();
  return row.id;
}

/** A reader's acknowledged cursor (`connector`, or `client:<id>` for an OAuth client): "0" before its first ack. */
export async function cursorOf(db: Db, name: string): Promise<string> {
  const row = await db.selectFrom('inbox_cursors').select(sql<string>`after_id::text`.as('after_id')).where('name', '=', name).executeTakeFirst();
  return row?.after_id ?? '0';
}

/** Move a reader's cursor forward only; the cursor as it stands after. */
export async function advanceCursor(db: Db, name: string, to: string, now: Date): Promise<string> {
  const row = await sql<{ after_id: string }>`
    insert into inbox_cursors (name, after_id, updated_at) values (${name}, ${to}::bigint, ${now})
    on conflict (name) do update set after_id = greatest(inbox_cursors.after_id, excluded.after_id), updated_at = excluded.updated_at
    returning after_id::text as after_id`.execute(db);
  return row.rows[0]?.after_id ?? to;
}

/** The newest handoff taken in (its id in the handoff inbox), to take in only what follows. */
export async function lastHandoffRef(db: Db): Promise<string> {
  const row = await db.selectFrom('inbox_events').select(sql<string>`coalesce(max(source_ref::bigint), 0)::text`.as('ref')).where('kind', '=', 'handoff').executeTakeFirstOrThrow();
  return row.ref;
}

/**
 * Delete what a person did in their DM with `identity`'s bot (they unregistered from it): their
 * messages and reactions there; how many. Their DMs with another bot stay.
 */
export async function deleteDmsOf(db: Db, userId: string, identity: string): Promise<number> {
  const r = await db.deleteFrom('inbox_events').where('guild_id', 'is', null).where('kind', 'in', ['dm', 'reaction']).where('author_id', '=', userId).where('identity', '=', identity).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** Who has events stored from a DM, and with which bot (for the check that each is still registered with it). */
export async function dmAuthors(db: Db): Promise<{ userId: string; identity: string }[]> {
  const rows = await db.selectFrom('inbox_events').select(['author_id', 'identity']).distinct().where('guild_id', 'is', null).where('kind', 'in', ['dm', 'reaction']).execute();
  return rows.map((r) => ({ userId: r.author_id, identity: r.identity }));
}

/** Drop events heard before `cutoff`; how many. */
export async function pruneOlderThan(db: Db, cutoff: Date): Promise<number> {
  const r = await db.deleteFrom('inbox_events').where('received_at', '<', cutoff).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** Keep at most `max` events per channel, dropping the oldest; how many were dropped. */
export async function pruneBeyondCount(db: Db, max: number): Promise<number> {
  const r = await sql`
    delete from inbox_events where id in (
      select id from (select id, row_number() over (partition by channel_id order by id desc) as n from inbox_events) ranked where n > ${max}
    )`.execute(db);
  return Number(r.numAffectedRows ?? 0n);
}

export async function catchupCursors(db: Db, channelIds: readonly string[]): Promise<Map<string, string>> {
  if (channelIds.length === 0) return new Map();
  const rows = await db.selectFrom('inbox_catchup').select(['channel_id', 'after_id']).where('channel_id', 'in', [...channelIds]).execute();
  return new Map(rows.map((r) => [r.channel_id, r.after_id]));
}

export async function saveCatchupCursor(db: Db, channelId: string, afterId: string, now: Date): Promise<void> {
  await db
    .insertInto('inbox_catchup')
    .values({ channel_id: channelId, after_id: afterId, updated_at: now })
    .onConflict((oc) => oc.column('channel_id').doUpdateSet({ after_id: afterId, updated_at: now }))
    .execute();
}

/** Drop finished pushes (done or given up) of events stored before `cutoff`. */
export async function prunePushes(db: Db, cutoff: Date): Promise<number> {
  const r = await db.deleteFrom('inbox_pushes').where('status', '<>', 'pending').where('created_at', '<', cutoff).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** The webhook push's job kind. */
export const PUSH_KIND = 'inbox.webhook';

/** The pushes queue: a pending push whose time came and whose lease is free or expired. */
export function pushesTable(db: Db): LeasedTable<InboxPushRow> {
  return new LeasedTable<InboxPushRow>(db as unknown as Kysely<unknown>, {
    table: 'inbox_pushes',
    key: 'id',
    orderBy: 'next_attempt_at',
    due: (now) => sql`status = 'pending' and next_attempt_at <= ${now} and (lease_expires_at is null or lease_expires_at <= ${now})`,
    onRelease: (now) => ({ next_attempt_at: sql`${now}` }),
  });
}
