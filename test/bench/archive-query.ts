/**
 * query_media over many indexed items: the rows (one completed scrape, items spread over 20
 * channels, 3 guilds, 50 authors, 4 kinds, 3 sources, one a minute from 2025-01-01, a rare
 * "needle" word every 1,000), the filters an operator uses, and the timing `npm run bench` reports
 * (test/archive-query.test.ts checks the answers on the same rows and filters).
 */
import { type Kysely, sql } from 'kysely';
import pino from 'pino';
import { MediaService, type Actor } from '../../src/modules/archive/media.service.js';
import { openStore } from '../../src/platform/db/database.js';
import type { Database } from '../../src/schema.js';
import { tablesOf } from '../../src/platform/db/tables.js';
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

/** Median milliseconds per page (a first page and the page after it) of each filter, over 5 rounds. */
export async function queryMediaMedians(media: MediaService): Promise<Record<string, number>> {
  const medians: Record<string, number> = {};
  for (const [name, query] of MEDIA_QUERIES) {
    await media.queryMedia({ ...query, limit: 50 }, operator);
    const timings: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      const page = await media.queryMedia({ ...query, limit: 50 }, operator);
      const next = page.nextCursor === null ? undefined : await media.queryMedia({ ...query, limit: 50, cursor: page.nextCursor }, operator);
      timings.push((performance.now() - t) / (next === undefined ? 1 : 2));
    }
    medians[name] = [...timings].sort((a, b) => a - b)[2] ?? Infinity;
  }
  return medians;
}

/** Items indexed for the bench (`--quick`: fewer). */
export const BENCH_ITEMS = 100_000;
/** What an operator's filter may take per page on a quiet machine. */
export const BUDGET_MS = 100;

/**
 * The bench's query_media phase on a migrated store (a database URL, or PGlite in `dataDir`): one
 * row per filter, its median ms per page, and a warning for each over BUDGET_MS.
 */
export async function archiveQueryPhase(databaseUrl: string | undefined, dataDir: string, items: number): Promise<Record<string, number>> {
  const store = await openStore<Database>({ databaseUrl, dataDir });
  try {
    await seedMediaItems(store.db, items);
    const medians = await queryMediaMedians(mediaService(store.db, dataDir));
    const row: Record<string, number> = {};
    for (const [name, ms] of Object.entries(medians)) {
      row[`query_media ${name}, median ms per page over ${items} items`] = Number(ms.toFixed(1));
      if (ms >= BUDGET_MS) console.warn(`query_media ${name}: median ${ms.toFixed(1)} ms per page, over the ${BUDGET_MS} ms budget`);
    }
    return row;
  } finally {
    await store.close();
  }
}
