import path from 'node:path';
import { archiveUiRoutes } from '../../web/archive-ui.js';
import type { JobsDeclaration, ModuleParts, ModuleServices } from '../contract.js';
import type { MediaLimits } from './settings.js';
import { archiveOperations, archiveRoutes } from './archive.http.js';
import { registerArchiveMetrics } from './archive.metrics.js';
import { archiveTotals } from './archive.repository.js';
import { DISCORD_MEDIA_HOSTS, MediaDownloader } from './media.downloader.js';
import { MediaService } from './media.service.js';
import { ScrapeJobs, scrapeQueue } from './scrape.jobs.js';
import { tablesOf } from '../../infra/db/tables.js';
import type { ArchiveDb } from './archive.table.js';
import { errorSummary } from '../../infra/errors.js';

/** How long one media download may take, unless the platform sets its own request timeout. */
const DOWNLOAD_TIMEOUT_MS = 15_000;

/** Start the media archive (its declaration is index.ts). */
export async function startArchive({ config, settings, db: tables, clock, log, registry, transports, doorbell, events, roles, site }: ModuleServices<MediaLimits>): Promise<ModuleParts<{ media: MediaService }>> {
  const db = tablesOf<ArchiveDb>(tables);
  const home = transports.home;
  const mediaDir = path.join(config.dataDir, 'media');
  const media = new MediaService(db, clock, {
    mediaDir,
    limits: settings,
    messageLinkBase: site.messageLinkBase ?? 'https://discord.com',
    channels: home.channels,
    canScrape: home.pages !== undefined,
    wake: () => doorbell.ring(),
    // Every process publishes (a dispatcher-only one runs scrapes too); those serving streams listen.
    publish: (topic, id) => events.publish(topic, id),
    log,
  });
  // The live event streams this process serves show the scrapes other processes run: re-read on their news.
  const unsubscribe: (() => void)[] = [];
  if (roles.http) {
    for (const topic of ['archive.scrape', 'archive.storage'] as const) {
      const hear = (ids: readonly string[] | undefined): void =>
        void media.heard(topic, ids).catch((err: unknown) => log.warn({ err: errorSummary(err) }, 'could not read archive changes for the event stream'));
      unsubscribe.push(await events.subscribe(topic, hear));
    }
  }
  registerArchiveMetrics(registry, () => archiveTotals(db));
  const jobs: JobsDeclaration[] = [];
  if (home.pages !== undefined) {
    // Scrapes are their own queue (the scrapes table); each step reads one page, paced like every request to the platform.
    const timeout = (config.platforms[home.name] as { timeoutMs?: number } | undefined)?.timeoutMs ?? DOWNLOAD_TIMEOUT_MS;
    const downloader = new MediaDownloader(mediaDir, { hosts: DISCORD_MEDIA_HOSTS, trustedOrigins: site.mediaOrigins, maxBytes: settings.maxFileBytes, timeoutMs: timeout });
    const scrapes = new ScrapeJobs(db, home.pages, downloader, media, clock, log, { maxAttempts: config.maxAttempts, retryBaseMs: config.retryBaseMs });
    // A scrape started on another replica (or one without a job runner) wakes this one through NOTIFY.
    jobs.push({ queue: scrapeQueue(db), kinds: [scrapes.kind()], concurrency: 2, listen: true });
  }
  const routes = archiveRoutes(media);
  return {
    gives: { media },
    operations: [archiveOperations(media)],
    // Its event streams end as the server stops: they would otherwise keep it open.
    routes: [{ router: routes.router, close: () => routes.closeStreams() }, { router: archiveUiRoutes() }],
    pages: [{ title: 'Media archive', path: '/ui/archive' }],
    jobs,
    prune: [{ what: 'the archive action log', run: () => media.pruneActions() }],
    close: async () => unsubscribe.forEach((u) => u()),
  };
}
