import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MediaDownloader } from '../src/modules/archive/media.downloader.js';
import { MediaService, type Actor } from '../src/modules/archive/media.service.js';
import type { MediaItem } from '../src/modules/archive/media.js';
import { mediaOf } from '../src/modules/archive/media.js';
import { ScrapeJobs, scrapeQueue, type ScrapeStepJob } from '../src/modules/archive/scrape.jobs.js';
import { OutboxWorker } from '../src/outbox/worker.js';
import type { Store } from '../src/infra/db/database.js';
import type { Database } from '../src/schema.js';
import { MemoryPlatform } from '../src/platforms/memory/memory-platform.js';
import type { ArchivedMessage } from '../src/platforms/platform.js';
import { migratedStore, type MigratedStore, type TestDatabase } from './support/db.js';
import { waitFor } from './support/wait.js';
import { tablesOf } from '../src/infra/db/tables.js';
import type { ArchiveDb } from '../src/modules/archive/archive.table.js';

const CHANNEL = '345678901234567000';
const GUILD = '234567890123456000';
const trusted: Actor = { tier: 'trusted', name: 'bridge', via: 'http' };

/** A message of the memory platform's history with what the archive looks for. */
function message(i: number): ArchivedMessage {
  return {
    id: String(1_000_000_000_000_000n + BigInt(i)),
    channelId: CHANNEL,
    authorId: `10000000000000000${i % 3}`,
    authorName: null,
    createdAt: new Date(Date.UTC(2025, 0, 1) + i * 1000),
    content: i % 4 === 0 ? `look https://cdn.discordapp.com/x/${i}.gif and https://example.com/page` : `text ${i}`,
    attachments: i % 2 === 0 ? [{ id: `a${i}`, url: `https://cdn.discordapp.com/a/${i}.bin`, filename: `${i}.bin`, contentType: 'audio/ogg', size: 10 }] : [],
    embeds: i % 5 === 0 ? [{ type: 'image', url: `https://cdn.discordapp.com/x/${i}.gif`, image: null, thumbnail: `https://media.discordapp.net/x/${i}.gif`, video: null }] : [],
  };
}

describe('media archive on the memory platform (any transport with history pages)', () => {
  let fixture: MigratedStore | undefined;
  let db: TestDatabase;
  let store: Store<Database>;
  let worker: OutboxWorker<ScrapeStepJob>;
  let media: MediaService;
  const memory = new MemoryPlatform();

  beforeAll(async () => {
    fixture = await migratedStore();
    ({ db, store } = fixture);
    memory.addChannel(CHANNEL, { guildId: GUILD, name: 'pics' });
    memory.archived.set(CHANNEL, Array.from({ length: 1_050 }, (_, i) => message(i)));
    const log = pino({ level: 'silent' });
    const clock = { now: () => new Date() };
    media = new MediaService(tablesOf<ArchiveDb>(store.db), clock, { mediaDir: db.dataDir, limits: { limitBytes: 1_000, warnPercent: 80, overrunPercent: 100 }, messageLinkBase: 'https://discord.com', channels: memory.channels, canScrape: true, wake: () => worker.wake(), log });
    worker = new OutboxWorker(scrapeQueue(tablesOf<ArchiveDb>(store.db)), clock, log, { leaseMs: 5_000, pollMs: 50, concurrency: 2, shutdownGraceMs: 1_000 });
    worker.register(new ScrapeJobs(tablesOf<ArchiveDb>(store.db), memory.pages, new MediaDownloader(db.dataDir, { hosts: [], trustedOrigins: [], maxBytes: 1, timeoutMs: 1_000 }), media, clock, log, { maxAttempts: 3, retryBaseMs: 10 }).kind());
    worker.start();
  }, 180_000);
  afterAll(async () => {
    await worker?.stop();
    await fixture?.close();
  });

  it('finds attachments, embed parts and media links (once per URL in a message), not other links', () => {
    expect(mediaOf(message(0)).map((m) => [m.source, m.kind, m.url])).toEqual([
      ['attachment', 'audio', 'https://cdn.discordapp.com/a/0.bin'],
      ['embed', 'image', 'https://media.discordapp.net/x/0.gif'],
      ['link', 'image', 'https://cdn.discordapp.com/x/0.gif'],
    ]);
    expect(mediaOf(message(1))).toEqual([]);
  });

  it('scrapes the whole history in pages, with live events, and indexes every item once', async () => {
    const events: number[] = [];
    media.events.on('scrape', (s) => events.push(s.messagesSeen));
    const { scrape } = await media.startScrape({ channelId: CHANNEL, mode: 'links' }, trusted);
    expect(scrape.guildId).toBe(GUILD);
    const done = await waitFor(async () => {
      const s = await media.getScrape(scrape.id, trusted);
      return s?.state === 'completed' ? s : undefined;
    }, 'the scrape to complete');
    // Counted from message(): an attachment on every even message (525 of 1,050), an embed image
    // on every fifth (210), a media link on every fourth (263; the example.com page is no media).
    const attachments = 525;
    const embeds = 210;
    const links = 263;
    expect(done).toMatchObject({ messagesSeen: 1_050, itemsFound: attachments + embeds + links, errors: 0 });
    expect(events).toEqual([0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1050]);
    const all = async (source: 'embed' | 'link'): Promise<MediaItem[]> => {
      const items: MediaItem[] = [];
      for (let cursor: string | undefined; ; ) {
        const page = await media.queryMedia({ scrapeId: scrape.id, source, limit: 100, ...(cursor !== undefined ? { cursor } : {}) }, trusted);
        items.push(...page.items);
        if (page.nextCursor === null) return items;
        cursor = page.nextCursor;
      }
    };
    const embedded = await all('embed');
    expect(embedded).toHaveLength(embeds);
    // An embed's item is its thumbnail on the media proxy, not the link it shows.
    expect(embedded.filter((i) => !i.url.startsWith('https://media.discordapp.net/')).map((i) => i.url)).toEqual([]);
    const linked = await all('link');
    expect(linked).toHaveLength(links);
    expect(linked.filter((i) => !/^https:\/\/cdn\.discordapp\.com\/x\/\d+\.gif$/.test(i.url)).map((i) => i.url)).toEqual([]);
  });

  it('a download scrape refuses a host outside the allowlist before any request, and says why', async () => {
    memory.archived.set('345678901234567001', [message(2)]);
    memory.addChannel('345678901234567001', { guildId: GUILD });
    const admin: Actor = { tier: 'admin', name: 'admin', via: 'http' };
    const { scrape } = await media.startScrape({ channelId: '345678901234567001', mode: 'download' }, admin);
    const done = await waitFor(async () => {
      const s = await media.getScrape(scrape.id, admin);
      return s?.state === 'completed' ? s : undefined;
    }, 'the download scrape to complete');
    expect(done.errors).toBe(1);
    const item = (await media.queryMedia({ scrapeId: scrape.id }, admin)).items[0];
    // This downloader's allowlist is empty: nothing is fetched.
    expect(item).toMatchObject({ state: 'refused', error: 'host cdn.discordapp.com is not a media host of the platform' });
    expect(item?.localPath).toBeNull();
  });
});
