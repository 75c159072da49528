/**
 * query_media over many indexed items: the rows (one completed scrape, items spread over 20
 * channels, 3 guilds, 50 authors, 4 kinds, 3 sources, one a minute from 2025-01-01, a rare
 * "needle" word every 1,000), the filters an operator uses, and the timing `npm run bench` reports
 * (test/archive-query.test.ts checks the answers on the same rows and filters).
 */
import { type Kysely, sql } from 'kysely';
import pino from 'pino';
import { MediaService, type Actor } from '../../src/modules/archive/media.service.js';
import { openStore } from '../../src/infra/db/database.js';
import type { Database } from '../../src/schema.js';
import { tablesOf } from '../../src/infra/db/tables.js';
import type { ArchiveDb } from '../../src/modules/archive/archive.table.js';

export const SCRAPE_ID = '0b6f3a52-5d0e-4c36-9f6f-1f2a3b4c5d6e';
export const operator: Actor = { tier: 'admin', name: 'admin', via: 'http' };

export type MediaQuery = Parameters<MediaService['queryMedia']>[0];

/** The filters measured and checked, each by name. */
export const MEDIA_QUERIES: [string, MediaQuery][] = [
  ['no filter', {}],
  ['kind', { kind: 'video' }],
  ['source and kind', { source: 'link', kind: 'image' }],
  ['channel', { channelId: '300000000000000007' }],
  ['guild and author', { guildId: '200000000000000001', author: '100000000000000013' }],
  ['scrape', { scrapeId: SCRAPE_ID }],
  ['time range', { after: new Date('2025-01-05T00:00:00Z'), before: new Date('2025-01-10T00:00:00Z') }],
  ['text (rare)', { text: 'NEEDLE' }],
  ['text and kind', { text: 'needle', kind: 'image' }],
  ['text (common)', { text: 'message' }],
];

/** Index `items` media items of one completed scrape, generated in the database, and analyze. */
export async function seedMediaItems(db: Kysely<Database>, items: number): Promise<void> {
  const now = new Date();
  await db.insertInto('media_scrapes').values({ id: SCRAPE_ID, channel_id: '1', guild_id: '1', mode: 'links', state: 'completed', pause_reason: null, cursor: null, messages_seen: items, items_found: items, bytes: 0, errors: 0, last_error: null, attempts: 0, next_step_at: now, lease_owner: null, lease_expires_at: null, created_at: now, updated_at: now, finished_at: now }).execute();
  await sql`
    insert into media_items (scrape_id, channel_id, guild_id, message_id, author_id, author_name, posted_at, kind, source, source_key, url, filename, content_type, size_bytes, sha256, state, error, content)
    select ${SCRAPE_ID}, (300000000000000000 + g % 20)::text, (200000000000000000 + g % 3)::text, (400000000000000000 + g)::text, (100000000000000000 + g % 50)::text, null,
      timestamptz '2025-01-01 00:00:00+00' + g * interval '1 minute', (array['image','video','audio','file'])[g % 4 + 1], (array['attachment','embed','link'])[g % 3 + 1], 'a:0',
      'https://cdn.discordapp.com/attachments/' || g || '.png', null, null, null, null, 'linked', null,
      'message ' || g || case when g % 1000 = 0 then ' with the needle' else '' end
    from generate_series(1, ${items}::int) g`.execute(db);
  await sql`analyze media_items`.execute(db);
}

/** The archive's read side over `db`, with no platform behind it. */
export function mediaService(db: Kysely<Database>, dataDir: string): MediaService {
  return new MediaService(tablesOf<ArchiveDb>(db), { now: () => new Date() }, { mediaDir: dataDir, limits: { limitBytes: 1, warnPercent: 80, overrunPercent: 100 }, messageLinkBase: 'https://discord.com', channels: undefined, canScrape: true, wake: () => undefined, log: pino({ level: 'silent' }) });
}

/** One filter's milliseconds per page (a first page and the page after it): median and p99. */
export interface PageTimes {
  median: number;
  p99: number;
}

/** Each filter's milliseconds per page (a first page and the page after it) over `rounds` rounds, after one unmeasured. */
export async function queryMediaTimes(media: MediaService, rounds = 5): Promise<Record<string, PageTimes>> {
  const times: Record<string, PageTimes> = {};
  for (const [name, query] of MEDIA_QUERIES) {
    await media.queryMedia({ ...query, limit: 50 }, operator);
    const timings: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const t = performance.now();
      const page = await media.queryMedia({ ...query, limit: 50 }, operator);
      const next = page.nextCursor === null ? undefined : await media.queryMedia({ ...query, limit: 50, cursor: page.nextCursor }, operator);
      timings.push((performance.now() - t) / (next === undefined ? 1 : 2));
    }
    const sorted = [...timings].sort((a, b) => a - b);
    const at = (p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Infinity;
    times[name] = { median: at(0.5), p99: at(0.99) };
  }
  return times;
}

/** Items indexed for the bench (`--quick`: fewer). */
export const BENCH_ITEMS = 1_000_000;
/** What an operator's filter may take per page on a quiet machine. */
export const BUDGET_MS = 100;

/**
 * The bench's query_media phase on a migrated store (a database URL, or PGlite in `dataDir`): one
 * row per filter with its median and p99 ms per page over `rounds` rounds, and a warning for each
 * whose p99 is over BUDGET_MS.
 */
export async function archiveQueryPhase(databaseUrl: string | undefined, dataDir: string, items: number, rounds: number): Promise<Record<string, number>> {
  const store = await openStore<Database>({ databaseUrl, dataDir });
  try {
    const seeding = performance.now();
    await seedMediaItems(store.db, items);
    console.log(`  query_media: ${items} items indexed in ${((performance.now() - seeding) / 1000).toFixed(1)} s`);
    const times = await queryMediaTimes(mediaService(store.db, dataDir), rounds);
    const row: Record<string, number> = {};
    for (const [name, t] of Object.entries(times)) {
      row[`query_media ${name}, median ms per page over ${items} items`] = Number(t.median.toFixed(1));
      row[`query_media ${name}, p99 ms per page over ${items} items`] = Number(t.p99.toFixed(1));
      if (t.p99 >= BUDGET_MS) console.warn(`query_media ${name}: p99 ${t.p99.toFixed(1)} ms per page, over the ${BUDGET_MS} ms budget`);
    }
    return row;
  } finally {
    await store.close();
  }
}
