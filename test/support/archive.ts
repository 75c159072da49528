import pino from 'pino';
import { MediaDownloader, type DownloadNetwork, type DownloadPolicy } from '../../src/modules/archive/media.downloader.js';
import { MediaService, type Actor, type StorageLimits } from '../../src/modules/archive/media.service.js';
import type { ScrapeJob } from '../../src/modules/archive/media.js';
import { ScrapeJobs, scrapeQueue, type ScrapeStepJob } from '../../src/modules/archive/scrape.jobs.js';
import { OutboxWorker } from '../../src/outbox/worker.js';
import type { Store } from '../../src/infra/db/database.js';
import type { Database } from '../../src/schema.js';
import { MemoryPlatform } from '../../src/platforms/memory/memory-platform.js';
import type { ArchivedAttachment, ArchivedMessage } from '../../src/platforms/platform.js';
import { migratedStore, type TestDatabase } from './db.js';
import { waitFor } from './wait.js';
import { tablesOf } from '../../src/infra/db/tables.js';
import type { ArchiveDb } from '../../src/modules/archive/archive.table.js';

export const GUILD = '234567890123456000';
export const admin: Actor = { tier: 'admin', name: 'admin', via: 'http' };

/**
 * The media archive on the memory platform, without HTTP: a service, a downloader (its network
 * injectable) and scrape workers on a fresh database. Several workers are several processes' worth
 * of concurrent steps on one database.
 */
export interface ArchiveHarness {
  db: TestDatabase;
  store: Store<Database>;
  media: MediaService;
  memory: MemoryPlatform;
  workers: OutboxWorker<ScrapeStepJob>[];
  start(): void;
  /** Start a download scrape of a channel the memory platform holds. */
  download(channelId: string): Promise<string>;
  /** Wait until the scrape is no longer running. */
  settled(id: string, timeoutMs?: number): Promise<ScrapeJob>;
  close(): Promise<void>;
}

export async function archiveHarness(options: { limits: StorageLimits; policy: Omit<DownloadPolicy, 'timeoutMs'>; network?: DownloadNetwork; workers?: number; leaseMs?: number }): Promise<ArchiveHarness> {
  const fixture = await migratedStore();
  const { db, store } = fixture;
  const memory = new MemoryPlatform();
  const log = pino({ level: 'silent' });
  const clock = { now: () => new Date() };
  const workers: OutboxWorker<ScrapeStepJob>[] = [];
  const media = new MediaService(tablesOf<ArchiveDb>(store.db), clock, {
    mediaDir: db.dataDir,
    limits: options.limits,
    messageLinkBase: 'https://discord.com',
    channels: memory.channels,
    canScrape: true,
    wake: () => workers.forEach((w) => w.wake()),
    log,
  });
  const downloader = new MediaDownloader(db.dataDir, { ...options.policy, timeoutMs: 5_000 }, options.network);
  for (let i = 0; i < (options.workers ?? 1); i++) {
    const worker = new OutboxWorker(scrapeQueue(tablesOf<ArchiveDb>(store.db)), clock, log, { leaseMs: options.leaseMs ?? 30_000, pollMs: 50, concurrency: 2, shutdownGraceMs: 5_000 });
    worker.register(new ScrapeJobs(tablesOf<ArchiveDb>(store.db), memory.pages, downloader, media, clock, log, { maxAttempts: 3, retryBaseMs: 20 }).kind());
    workers.push(worker);
  }
  return {
    db,
    store,
    media,
    memory,
    workers,
    start: () => workers.forEach((w) => w.start()),
    async download(channelId) {
      if (!memory.channelsById.has(channelId)) memory.addChannel(channelId, { guildId: GUILD });
      return (await media.startScrape({ channelId, mode: 'download', confirm: true }, admin)).scrape.id;
    },
    settled: (id, timeoutMs = 60_000) =>
      waitFor(async () => {
        const s = await media.getScrape(id, admin);
        return s !== null && s.state !== 'running' ? s : undefined;
      }, `scrape ${id} to settle`, timeoutMs),
    async close() {
      await Promise.all(workers.map((w) => w.stop()));
      await fixture.close();
    },
  };
}

/** A message of a channel with one attachment at `url`. */
export function messageWith(channelId: string, i: number, url: string, extra: Partial<ArchivedAttachment> = {}): ArchivedMessage {
  return {
    id: String(1_100_000_000_000_000n + BigInt(i)),
    channelId,
    authorId: '100000000000000007',
    authorName: null,
    createdAt: new Date(Date.UTC(2025, 0, 1) + i * 1000),
    content: `picture ${i}`,
    attachments: [{ id: `${channelId}-${i}`, url, filename: url.split('/').pop() ?? 'file', contentType: 'image/png', size: null, ...extra }],
    embeds: [],
  };
}
