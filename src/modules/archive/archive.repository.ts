import { sql, type ExpressionBuilder, type Kysely } from 'kysely';
import type { Lease } from '../../outbox/worker.js';
import type { ArchiveDb } from './archive.table.js';
import type { ArchiveActionRow, ArchiveActionTable, ItemState, MediaItemRow, MediaKind, MediaScrapeRow, NewMediaItem, ScrapeMode, ScrapeState } from './archive.table.js';

type Db = Kysely<ArchiveDb>;

/** The filters of query_media, all optional. */
export interface MediaFilter {
  kind?: MediaKind | undefined;
  source?: string | undefined;
  scrapeId?: string | undefined;
  channelId?: string | undefined;
  guildId?: string | undefined;
  author?: string | undefined;
  after?: Date | undefined;
  before?: Date | undefined;
  text?: string | undefined;
  /** Any of these states (e.g. refused and failed: what went wrong). */
  state?: readonly ItemState[] | undefined;
}

/** Where a page ended: the last item's time and id (keyset, stable under inserts). */
export interface ItemKey {
  postedAt: Date;
  id: string;
}

export async function insertScrape(db: Db, row: { id: string; channelId: string; channelName: string | null; guildId: string | null; mode: ScrapeMode; now: Date }): Promise<MediaScrapeRow> {
  return db
    .insertInto('media_scrapes')
    .values({
      id: row.id,
      channel_id: row.channelId,
      channel_name: row.channelName,
      guild_id: row.guildId,
      mode: row.mode,
      state: 'running',
      pause_reason: null,
      cursor: null,
      messages_seen: 0,
      items_found: 0,
      bytes: 0,
      errors: 0,
      last_error: null,
      attempts: 0,
      next_step_at: row.now,
      lease_owner: null,
      lease_token: null,
      lease_expires_at: null,
      created_at: row.now,
      updated_at: row.now,
      finished_at: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function findScrape(db: Db, id: string): Promise<MediaScrapeRow | undefined> {
  return db.selectFrom('media_scrapes').selectAll().where('id', '=', id).executeTakeFirst();
}

export function runningScrapeOf(db: Db, channelId: string): Promise<MediaScrapeRow | undefined> {
  return db.selectFrom('media_scrapes').selectAll().where('channel_id', '=', channelId).where('state', '=', 'running').executeTakeFirst();
}

/** The newest stopped or paused scrape of a channel in a mode: starting it again resumes it. */
export function resumableScrape(db: Db, channelId: string, mode: ScrapeMode): Promise<MediaScrapeRow | undefined> {
  return db
    .selectFrom('media_scrapes')
    .selectAll()
    .where('channel_id', '=', channelId)
    .where('mode', '=', mode)
    .where('state', 'in', ['stopped', 'paused'])
    .orderBy('created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
}

export function listScrapes(db: Db): Promise<MediaScrapeRow[]> {
  return db.selectFrom('media_scrapes').selectAll().orderBy('created_at', 'desc').orderBy('id').execute();
}

/** Resume: running again, due now, from its cursor. Undefined when another is running on the channel. */
export function resumeScrape(db: Db, id: string, now: Date): Promise<MediaScrapeRow | undefined> {
  return db
    .updateTable('media_scrapes')
    .set({ state: 'running', pause_reason: null, next_step_at: now, updated_at: now, finished_at: null })
    .where('id', '=', id)
    .where('state', 'in', ['stopped', 'paused'])
    .returningAll()
    .executeTakeFirst();
}

/** Stop (or pause) a scrape; a step in flight keeps its lease and still records its page. */
export function setScrapeState(db: Db, id: string, from: readonly ScrapeState[], to: 'stopped' | 'paused', reason: string | null, now: Date): Promise<MediaScrapeRow | undefined> {
  return db
    .updateTable('media_scrapes')
    .set({ state: to, pause_reason: reason, updated_at: now })
    .where('id', '=', id)
    .where('state', 'in', [...from])
    .returningAll()
    .executeTakeFirst();
}

export { claimScrapes, scrapesTable } from './scrape.queue.js';

/** Index a page's items; a page read again (after a crash) adds nothing twice. Returns how many were new. */
export async function insertItems(db: Db, items: NewMediaItem[]): Promise<number> {
  if (items.length === 0) return 0;
  const inserted = await db
    .insertInto('media_items')
    .values(items)
    .onConflict((oc) => oc.columns(['scrape_id', 'message_id', 'source_key']).doNothing())
    .returning('id')
    .execute();
  return inserted.length;
}

/** What a step's outcome writes besides it: the lease ends. */
const LEASE_ENDED = { lease_owner: null, lease_token: null, lease_expires_at: null };

/** The scrape `id` while the claim `lease` holds it: its owner and its claim's token. */
function heldUnder(id: string, lease: Lease) {
  return (eb: ExpressionBuilder<ArchiveDb, 'media_scrapes'>) => eb.and([eb('id', '=', id), eb('lease_owner', '=', lease.owner), ...(lease.token !== null ? [eb('lease_token', '=', lease.token)] : [])]);
}

/**
 * A step's outcome, written only while its lease is held. A scrape stopped meanwhile stays stopped.
 * `pause` ends the step paused (storage full) with the cursor at the last message fully indexed.
 * Stored files were counted (items and bytes) as each was committed, not here.
 */
export async function recordStep(db: Db, id: string, lease: Lease, step: { cursor: string | null; messages: number; items: number; errors: number; lastError: string | null; done: boolean; pause?: string | undefined; nextAt: Date; now: Date }): Promise<MediaScrapeRow | undefined> {
  return db
    .updateTable('media_scrapes')
    .set((eb) => ({
      cursor: step.cursor,
      messages_seen: eb('messages_seen', '+', step.messages),
      items_found: eb('items_found', '+', step.items),
      errors: eb('errors', '+', step.errors),
      ...(step.lastError !== null ? { last_error: step.lastError } : {}),
      state: step.done
        ? sql<'completed'>`case when state = 'running' then 'completed' else state end`
        : step.pause !== undefined
          ? sql<'paused'>`case when state = 'running' then 'paused' else state end`
          : sql<'running'>`state`,
      ...(step.pause !== undefined ? { pause_reason: sql<string | null>`case when state = 'running' then ${step.pause} else pause_reason end` } : {}),
      finished_at: step.done ? sql<Date>`case when state = 'running' then ${step.now}::timestamptz else finished_at end` : sql<Date | null>`finished_at`,
      next_step_at: step.nextAt,
      updated_at: step.now,
      ...LEASE_ENDED,
      // Every claim counts an attempt; a step that read its page starts the count again, so only
      // failures in a row (not a long scrape's many steps) can exhaust the retries.
      attempts: 0,
    }))
    .where(heldUnder(id, lease))
    .returningAll()
    .executeTakeFirst();
}

/** A step that could not read its page: try again later (or fail for good), under the lease. */
export function recordStepFailure(db: Db, id: string, lease: Lease, failure: { error: string; nextAt: Date; fail: boolean; now: Date }): Promise<MediaScrapeRow | undefined> {
  return db
    .updateTable('media_scrapes')
    .set((eb) => ({
      errors: eb('errors', '+', 1),
      last_error: failure.error,
      next_step_at: failure.nextAt,
      updated_at: failure.now,
      ...LEASE_ENDED,
      ...(failure.fail ? { state: sql<'failed'>`case when state = 'running' then 'failed' else state end`, finished_at: failure.now } : {}),
    }))
    .where(heldUnder(id, lease))
    .returningAll()
    .executeTakeFirst();
}

/** Pause under the lease (storage past its overrun level). */
export function pauseUnderLease(db: Db, id: string, lease: Lease, reason: string, now: Date): Promise<MediaScrapeRow | undefined> {
  return db
    .updateTable('media_scrapes')
    .set({ state: sql<'paused'>`case when state = 'running' then 'paused' else state end`, pause_reason: reason, updated_at: now, ...LEASE_ENDED })
    .where(heldUnder(id, lease))
    .returningAll()
    .executeTakeFirst();
}

/** A file already fetched from this URL (by any scrape): it is not fetched again. */
export async function blobForUrl(db: Db, url: string): Promise<{ sha256: string; size: number; contentType: string } | undefined> {
  const r = await db
    .selectFrom('media_items as i')
    .innerJoin('media_blobs as b', 'b.sha256', 'i.sha256')
    .select(['b.sha256', 'b.size_bytes', 'b.content_type'])
    .where('i.url', '=', url)
    .limit(1)
    .executeTakeFirst();
  return r === undefined ? undefined : { sha256: r.sha256, size: Number(r.size_bytes), contentType: r.content_type };
}

/** The claim a scrape step runs under: its worker, and when the lease it took ends. */
export interface StepLease {
  owner: string;
  expiresAt: Date;
}

/** Whether a step's room could be taken; when not, the bytes stored already. */
export type StorageReservation = { reserved: true } | { reserved: false; usedBytes: number };

/**
 * Take room for a file of at most `bytes` before it is written, while stored bytes plus every live
 * reservation are still under `threshold`: so the archive passes it by less than one file, however
 * many steps and processes download at once. The storage row's lock makes check and insert one
 * step; later statements see what an earlier holder of the lock committed.
 */
export async function reserveStorage(db: Db, r: { id: string; scrapeId: string; lease: StepLease; bytes: number; threshold: number; now: Date }): Promise<StorageReservation> {
  return db.transaction().execute(async (trx) => {
    const storage = await trx.selectFrom('media_storage').select('used_bytes').where('id', '=', 1).forUpdate().executeTakeFirstOrThrow();
    const used = Number(storage.used_bytes);
    // A reservation lives as long as its step's lease: one whose step ended, died or lost the scrape
    // is dropped; the rest, with stored bytes, must leave room. One statement after the lock.
    const taken = await sql<{ id: string }>`
      with dead as (
        delete from media_reservations r
        where not exists (
          select 1 from media_scrapes s
          where s.id = r.scrape_id and s.lease_owner = r.lease_owner and s.lease_expires_at = r.lease_expires_at and s.lease_expires_at > ${r.now}::timestamptz)
        returning r.id),
      live as (select coalesce(sum(bytes), 0) as reserved from media_reservations where id not in (select id from dead))
      insert into media_reservations (id, scrape_id, lease_owner, lease_expires_at, bytes, created_at)
      select ${r.id}, ${r.scrapeId}, ${r.lease.owner}, ${r.lease.expiresAt}::timestamptz, ${r.bytes}, ${r.now}::timestamptz
      from live where ${used}::bigint + live.reserved < ${r.threshold}::numeric
      returning id`.execute(trx);
    return taken.rows.length === 1 ? { reserved: true } : { reserved: false, usedBytes: used };
  });
}

/** Give back room a download did not use (it failed, or was refused after its headers). */
export async function releaseStorage(db: Db, id: string): Promise<void> {
  await db.deleteFrom('media_reservations').where('id', '=', id).execute();
}

class StepLeaseLost extends Error {}

/**
 * A stored file's item, written the moment its file is in place, under the step's lease, in one
 * transaction: the file's row (new content adds its size to storage; content stored before adds
 * nothing), its reservation given back, the item, and the scrape's counters (a file counts once per
 * scrape). So storage and every scrape's bytes agree at every instant, and no stored byte belongs
 * to no scrape. `file` is absent when the content is already stored (a URL fetched before).
 * Returns false when the step's lease (or its reservation) is gone: nothing is written.
 */
export async function commitStoredItem(
  db: Db,
  c: { scrapeId: string; owner: string; now: Date; item: NewMediaItem & { sha256: string }; file?: { size: number; contentType: string; path: string; reservation: string } | undefined },
): Promise<boolean> {
  const sha256 = c.item.sha256;
  return db
    .transaction()
    .execute(async (trx) => {
      if (c.file !== undefined) {
        // Lock order, everywhere: the storage row, then the scrape.
        await trx.selectFrom('media_storage').select('id').where('id', '=', 1).forUpdate().execute();
        const released = await trx.deleteFrom('media_reservations').where('id', '=', c.file.reservation).returning('id').executeTakeFirst();
        if (released === undefined) throw new StepLeaseLost();
        await trx
          .insertInto('media_blobs')
          .values({ sha256, size_bytes: c.file.size, content_type: c.file.contentType, path: c.file.path, created_at: c.now })
          .onConflict((oc) => oc.column('sha256').doNothing())
          .execute();
      }
      const inserted = await trx
        .insertInto('media_items')
        .values(c.item)
        .onConflict((oc) => oc.columns(['scrape_id', 'message_id', 'source_key']).doNothing())
        .returning('id')
        .executeTakeFirst();
      // The file counts in the scrape's bytes when this item is the scrape's first with its content.
      const counted = await trx
        .updateTable('media_scrapes')
        .set(
          inserted === undefined
            ? { updated_at: sql<Date>`updated_at` }
            : {
                items_found: sql<number>`items_found + 1`,
                bytes: sql<number>`bytes + case
                  when (select count(*) from media_items i where i.scrape_id = ${c.scrapeId} and i.sha256 = ${sha256}) = 1
                  then (select b.size_bytes from media_blobs b where b.sha256 = ${sha256}) else 0 end`,
              },
        )
        .where('id', '=', c.scrapeId)
        .where('lease_owner', '=', c.owner)
        .where('lease_expires_at', '>', c.now)
        .returning('id')
        .executeTakeFirst();
      if (counted === undefined) throw new StepLeaseLost();
      return true;
    })
    .catch((err: unknown) => {
      if (err instanceof StepLeaseLost) return false;
      throw err;
    });
}

export function findBlob(db: Db, sha256: string): Promise<{ sha256: string; content_type: string; path: string } | undefined> {
  return db.selectFrom('media_blobs').select(['sha256', 'content_type', 'path']).where('sha256', '=', sha256).executeTakeFirst();
}

/**
 * Delete a scrape and its items, then the files no remaining item references (another scrape's
 * items keep theirs). Returns the paths of the files to remove.
 */
export async function deleteScrapeAndOrphans(db: Db, id: string): Promise<string[] | undefined> {
  return db.transaction().execute(async (trx) => {
    // Lock order, everywhere: the storage row (deleting files changes it), then the scrape.
    await trx.selectFrom('media_storage').select('id').where('id', '=', 1).forUpdate().execute();
    const shas = await trx.selectFrom('media_items').select('sha256').distinct().where('scrape_id', '=', id).where('sha256', 'is not', null).execute();
    const deleted = await trx.deleteFrom('media_scrapes').where('id', '=', id).returning('id').executeTakeFirst();
    if (deleted === undefined) return undefined;
    const candidates = shas.flatMap((s) => (s.sha256 === null ? [] : [s.sha256]));
    if (candidates.length === 0) return [];
    const orphans = await trx
      .deleteFrom('media_blobs')
      .where('sha256', 'in', candidates)
      .where(({ not, exists, selectFrom }) => not(exists(selectFrom('media_items').select('id').whereRef('media_items.sha256', '=', 'media_blobs.sha256'))))
      .returning('path')
      .execute();
    return orphans.map((o) => o.path);
  });
}

/** Bytes of every stored file (media_blobs' sum, kept by the database). */
export async function usedBytes(db: Db): Promise<number> {
  const r = await db.selectFrom('media_storage').select('used_bytes').where('id', '=', 1).executeTakeFirstOrThrow();
  return Number(r.used_bytes);
}

/** Stored bytes by kind (a file counted once, under the kind of the first item that stored it). */
export async function bytesByKind(db: Db): Promise<Record<MediaKind, number>> {
  const rows = await sql<{ kind: MediaKind; bytes: string | number }>`
    select k.kind, sum(b.size_bytes) as bytes
    from media_blobs b
    join lateral (select i.kind from media_items i where i.sha256 = b.sha256 order by i.id limit 1) k on true
    group by k.kind`.execute(db);
  const out: Record<MediaKind, number> = { image: 0, video: 0, audio: 0, file: 0 };
  for (const r of rows.rows) out[r.kind] = Number(r.bytes);
  return out;
}

export function findItem(db: Db, id: string): Promise<MediaItemRow | undefined> {
  return db.selectFrom('media_items').selectAll().where('id', '=', id).executeTakeFirst();
}

/** One page of items, newest message first, after `from` when given. */
export function queryItems(db: Db, filter: MediaFilter, from: ItemKey | undefined, limit: number): Promise<MediaItemRow[]> {
  let q = db.selectFrom('media_items').selectAll();
  if (filter.kind !== undefined) q = q.where('kind', '=', filter.kind);
  if (filter.source !== undefined) q = q.where('source', '=', filter.source as 'attachment');
  if (filter.scrapeId !== undefined) q = q.where('scrape_id', '=', filter.scrapeId);
  if (filter.channelId !== undefined) q = q.where('channel_id', '=', filter.channelId);
  if (filter.guildId !== undefined) q = q.where('guild_id', '=', filter.guildId);
  if (filter.author !== undefined) q = q.where('author_id', '=', filter.author);
  if (filter.state !== undefined && filter.state.length > 0) q = q.where('state', 'in', [...filter.state]);
  if (filter.after !== undefined) q = q.where('posted_at', '>', filter.after);
  if (filter.before !== undefined) q = q.where('posted_at', '<', filter.before);
  // Words, as a search box takes them ("a b" both, "a or b", -not, "a phrase"); the GIN index answers it.
  if (filter.text !== undefined) q = q.where(sql<boolean>`to_tsvector('simple', content) @@ websearch_to_tsquery('simple', ${filter.text})`);
  if (from !== undefined) q = q.where(sql<boolean>`(posted_at, id) < (${from.postedAt}::timestamptz, ${from.id}::bigint)`);
  return q.orderBy('posted_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
}

export async function insertAction(db: Db, action: Omit<ArchiveActionTable, 'id'>): Promise<void> {
  await db.insertInto('archive_actions').values(action).execute();
}

/** Forget log entries written before `cutoff`. */
export async function pruneActions(db: Db, cutoff: Date): Promise<number> {
  const r = await db.deleteFrom('archive_actions').where('at', '<', cutoff).executeTakeFirst();
  return Number(r.numDeletedRows);
}

export function listActions(db: Db, before: string | undefined, limit: number): Promise<ArchiveActionRow[]> {
  let q = db.selectFrom('archive_actions').selectAll();
  if (before !== undefined) q = q.where('id', '<', before);
  return q.orderBy('id', 'desc').limit(limit).execute();
}

/** The archive's figures for /metrics: scrapes by state with the items they found and their errors, and the bytes stored. */
export async function archiveTotals(db: Db): Promise<{ scrapes: { state: ScrapeState; scrapes: number; items: number; errors: number }[]; storedBytes: number }> {
  const [rows, storedBytes] = await Promise.all([
    db
      .selectFrom('media_scrapes')
      .select((eb) => ['state', eb.fn.countAll<string | number>().as('scrapes'), eb.fn.sum<string | number>('items_found').as('items'), eb.fn.sum<string | number>('errors').as('errors')])
      .groupBy('state')
      .execute(),
    usedBytes(db),
  ]);
  return { scrapes: rows.map((r) => ({ state: r.state, scrapes: Number(r.scrapes), items: Number(r.items), errors: Number(r.errors) })), storedBytes };
}
