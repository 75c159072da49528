import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ArchiveDb } from '../src/modules/archive/archive.table.js';
import { MediaService, ScrapeRunningError, type Actor } from '../src/modules/archive/media.service.js';
import { ScrapeRequestReusedError } from '../src/modules/archive/scrape-requests.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { MemoryPlatform } from '../src/platforms/memory/memory-platform.js';
import { migratedStore, type MigratedStore } from './support/db.js';

const ALERTS = '345678901234567100';
const OPS = '345678901234567101';
const GUILD = '234567890123456100';
const trusted: Actor = { tier: 'trusted', name: 'bridge', via: 'mcp' };
const key = (c: string): string => c.repeat(64);

/**
 * A start's request_id: the same one again (a retry after a timeout, two at once) answers the
 * scrape that start made and starts nothing, whatever state it is in now. No worker runs: the
 * scrapes stay as the starts left them.
 */
describe('a media scrape started with a request_id', () => {
  let fixture: MigratedStore | undefined;
  let media: MediaService;
  let db: ReturnType<typeof tablesOf<ArchiveDb>>;

  beforeAll(async () => {
    fixture = await migratedStore();
    const memory = new MemoryPlatform();
    memory.addChannel(ALERTS, { guildId: GUILD, name: 'alerts' });
    memory.addChannel(OPS, { guildId: GUILD, name: 'ops' });
    db = tablesOf<ArchiveDb>(fixture.store.db);
    const limits = { limitBytes: 1_000_000, warnPercent: 80, overrunPercent: 100 };
    media = new MediaService(db, { now: () => new Date() }, { mediaDir: fixture.db.dataDir, limits, messageLinkBase: 'https://discord.com', channels: memory.channels, canScrape: true, wake: () => undefined, log: pino({ level: 'silent' }) });
  }, 180_000);
  afterAll(async () => {
    await fixture?.close();
  });

  const scrapesOf = async (channel: string) => db.selectFrom('media_scrapes').select(['id', 'state']).where('channel_id', '=', channel).execute();

  it('two identical starts at once make one scrape: both answer it, one as existing', async () => {
    const [a, b] = await Promise.all([1, 2].map(() => media.startScrape({ channelId: ALERTS, mode: 'links', requestId: key('a') }, trusted)));
    expect(await scrapesOf(ALERTS)).toHaveLength(1);
    expect(a?.scrape.id).toBe(b?.scrape.id);
    expect([a?.existing === true, b?.existing === true].sort()).toEqual([false, true]);
  });

  it('the same key after the scrape stopped answers it as it is now and resumes nothing; a new key resumes it', async () => {
    const [scrape] = await scrapesOf(ALERTS);
    await media.stopScrape(scrape?.id ?? '', trusted);
    const again = await media.startScrape({ channelId: ALERTS, mode: 'links', requestId: key('a') }, trusted);
    expect(again).toMatchObject({ existing: true, scrape: { id: scrape?.id, state: 'stopped' } });
    const resumed = await media.startScrape({ channelId: ALERTS, mode: 'links', requestId: key('b') }, trusted);
    expect(resumed).toMatchObject({ resumed: true, scrape: { id: scrape?.id, state: 'running' } });
    expect(resumed.existing).not.toBe(true);
    // The resume's key answers the same scrape too.
    expect(await media.startScrape({ channelId: ALERTS, mode: 'links', requestId: key('b') }, trusted)).toMatchObject({ existing: true, scrape: { id: scrape?.id } });
  });

  it('the same key for another channel or mode is refused; without a key the running scrape refuses a second', async () => {
    await expect(media.startScrape({ channelId: OPS, mode: 'links', requestId: key('a') }, trusted)).rejects.toBeInstanceOf(ScrapeRequestReusedError);
    await expect(media.startScrape({ channelId: ALERTS, mode: 'download', requestId: key('a') }, { ...trusted, tier: 'admin' })).rejects.toBeInstanceOf(ScrapeRequestReusedError);
    await expect(media.startScrape({ channelId: ALERTS, mode: 'links' }, trusted)).rejects.toBeInstanceOf(ScrapeRunningError);
    expect(await scrapesOf(OPS)).toHaveLength(0);
    expect(await scrapesOf(ALERTS)).toHaveLength(1);
  });
});
