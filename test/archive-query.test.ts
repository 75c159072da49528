import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MediaService } from '../src/modules/archive/media.service.js';
import type { MediaItem } from '../src/modules/archive/media.js';
import type { Store } from '../src/infra/db/database.js';
import type { Database } from '../src/schema.js';
import { MEDIA_QUERIES, mediaService, operator, seedMediaItems, type MediaQuery } from './bench/archive-query.js';
import { migratedStore, onPostgres, type MigratedStore, type TestDatabase } from './support/db.js';

/** Enough rows for every filter to answer more than one page; the timing is `npm run bench`'s. */
const ITEMS = 20_000;

/** Whether `item` is one `query` asks for, read from the item itself. */
function matches(item: MediaItem, query: MediaQuery): boolean {
  const posted = Date.parse(item.postedAt);
  return (
    (query.kind === undefined || item.kind === query.kind) &&
    (query.source === undefined || item.source === query.source) &&
    (query.channelId === undefined || item.channelId === query.channelId) &&
    (query.guildId === undefined || item.guildId === query.guildId) &&
    (query.author === undefined || item.authorId === query.author) &&
    (query.scrapeId === undefined || item.scrapeId === query.scrapeId) &&
    (query.after === undefined || posted > query.after.getTime()) &&
    (query.before === undefined || posted < query.before.getTime()) &&
    (query.text === undefined || (item.content ?? '').toLowerCase().includes(query.text.toLowerCase()))
  );
}

/** query_media over 20,000 indexed items: every filter answers what it asks for, page after page. */
describe(`query_media over ${ITEMS} items (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, () => {
  let fixture: MigratedStore | undefined;
  let db: TestDatabase;
  let store: Store<Database>;
  let media: MediaService;

  beforeAll(async () => {
    fixture = await migratedStore();
    ({ db, store } = fixture);
    await seedMediaItems(store.db, ITEMS);
    media = mediaService(store.db, db.dataDir);
  }, 180_000);
  afterAll(async () => {
    await fixture?.close();
  });

  it.each(MEDIA_QUERIES)('%s: two pages of only matching items, newest first, none twice', async (_name, query) => {
    const first = await media.queryMedia({ ...query, limit: 50 }, operator);
    expect(first.items.length).toBeGreaterThan(0);
    const next = first.nextCursor === null ? [] : (await media.queryMedia({ ...query, limit: 50, cursor: first.nextCursor }, operator)).items;
    const both = [...first.items, ...next];
    expect(both.filter((i) => !matches(i, query)).map((i) => i.id)).toEqual([]);
    expect(new Set(both.map((i) => i.id)).size).toBe(both.length);
    const times = both.map((i) => Date.parse(i.postedAt));
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it('counts what the rows hold: the rare word once in 1,000, a channel one item in 20', async () => {
    const all = async (query: MediaQuery): Promise<number> => {
      let n = 0;
      for (let cursor: string | undefined; ; ) {
        const page = await media.queryMedia({ ...query, limit: 200, ...(cursor !== undefined ? { cursor } : {}) }, operator);
        n += page.items.length;
        if (page.nextCursor === null) return n;
        cursor = page.nextCursor;
      }
    };
    expect(await all({ text: 'needle' })).toBe(ITEMS / 1_000);
    expect(await all({ channelId: '300000000000000007' })).toBe(ITEMS / 20);
  });
});
