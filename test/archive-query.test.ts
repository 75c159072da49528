import { sql } from 'kysely';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MediaService, type Actor } from '../src/modules/archive/media.service.js';
import { openStore, type Store } from '../src/platform/db/database.js';
import { migrateToLatest } from '../src/platform/db/migrate.js';
import type { Database } from '../src/schema.js';
import { onPostgres, testDatabase, type TestDatabase } from './support/db.js';

const ITEMS = 100_000;
const operator: Actor = { tier: 'admin', name: 'admin', via: 'http' };

/** query_media over 100,000 indexed items: every filter answers in well under 100 ms. */
describe(`query_media over ${ITEMS} items (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, () => {
  let db: TestDatabase;
  let store: Store<Database>;
  let media: MediaService;

  beforeAll(async () => {
    db = await testDatabase();
    store = await openStore<Database>({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
    await migrateToLatest(store.db);
    const now = new Date();
    await store.db.insertInto('media_scrapes').values({ id: '0b6f3a52-5d0e-4c36-9f6f-1f2a3b4c5d6e', channel_id: '1', guild_id: '1', mode: 'links', state: 'completed', pause_reason: null, cursor: null, messages_seen: ITEMS, items_found: ITEMS, bytes: 0, errors: 0, last_error: null, attempts: 0, next_step_at: now, lease_owner: null, lease_expires_at: null, created_at: now, updated_at: now, finished_at: now }).execute();
    await sql`
      insert into media_items (scrape_id, channel_id, guild_id, message_id, author_id, author_name, posted_at, kind, source, source_key, url, filename, content_type, size_bytes, sha256, state, error, content)
      select '0b6f3a52-5d0e-4c36-9f6f-1f2a3b4c5d6e', (300000000000000000 + g % 20)::text, (200000000000000000 + g % 3)::text, (400000000000000000 + g)::text, (100000000000000000 + g % 50)::text, null,
        timestamptz '2025-01-01 00:00:00+00' + g * interval '1 minute', (array['image','video','audio','file'])[g % 4 + 1], (array['attachment','embed','link'])[g % 3 + 1], 'a:0',
        'https://cdn.discordapp.com/attachments/' || g || '.png', null, null, null, null, 'linked', null,
        'message ' || g || case when g % 1000 = 0 then ' with the needle' else '' end
      from generate_series(1, ${ITEMS}) g`.execute(store.db);
    await sql`analyze media_items`.execute(store.db);
    media = new MediaService(store.db, { now: () => new Date() }, { mediaDir: db.dataDir, limits: { limitBytes: 1, warnPercent: 80, overrunPercent: 100 }, messageLinkBase: 'https://discord.com', channels: undefined, canScrape: true, wake: () => undefined, log: pino({ level: 'silent' }) });
  }, 180_000);
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  const queries: [string, Parameters<MediaService['queryMedia']>[0]][] = [
    ['no filter', {}],
    ['kind', { kind: 'video' }],
    ['source and kind', { source: 'link', kind: 'image' }],
    ['channel', { channelId: '300000000000000007' }],
    ['guild and author', { guildId: '200000000000000001', author: '100000000000000013' }],
    ['scrape', { scrapeId: '0b6f3a52-5d0e-4c36-9f6f-1f2a3b4c5d6e' }],
    ['time range', { after: new Date('2025-02-01T00:00:00Z'), before: new Date('2025-02-10T00:00:00Z') }],
    ['text (rare)', { text: 'NEEDLE' }],
    ['text and kind', { text: 'needle', kind: 'image' }],
    ['text (common)', { text: 'message' }],
  ];

  it.each(queries)('%s answers in well under 100 ms, every page', async (_name, query) => {
    const first = await media.queryMedia({ ...query, limit: 50 }, operator);
    expect(first.items.length).toBeGreaterThan(0);
    const timings: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      const page = await media.queryMedia({ ...query, limit: 50 }, operator);
      const next = page.nextCursor === null ? undefined : await media.queryMedia({ ...query, limit: 50, cursor: page.nextCursor }, operator);
      timings.push((performance.now() - t) / (next === undefined ? 1 : 2));
    }
    const median = [...timings].sort((a, b) => a - b)[2] ?? Infinity;
    console.log(`query_media ${_name}: median ${median.toFixed(1)} ms per page over ${ITEMS} items`);
    expect(median).toBeLessThan(100);
  });
});
