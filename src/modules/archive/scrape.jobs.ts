import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Job, JobContext, JobKind, JobQueue } from '../../outbox/worker.js';
import type { Clock } from '../../platform/clock.js';
import { errorSummary } from '../../platform/errors.js';
import type { Database } from '../../schema.js';
import { TransportError, type HistoryPages } from '../../transports/transport.js';
import { blobForUrl, claimScrapes, insertBlob, insertItems, pauseUnderLease, recordStep, recordStepFailure, releaseScrapes } from './archive.repository.js';
import type { ItemState, MediaScrapeRow, NewMediaItem } from './archive.table.js';
import { blobRelativePath, mediaOf, toScrapeJob } from './media.js';
import type { MediaDownloader } from './media.downloader.js';
import type { MediaService } from './media.service.js';

/** The scrape job kind on the outbox: one step reads one page of history. */
export const SCRAPE_KIND = 'media_scrape';

/** Messages per step: Discord's largest page. */
export const SCRAPE_PAGE_SIZE = 100;

class LeaseLost extends Error {}

/** A scrape row is its own outbox job. */
export interface ScrapeStepJob extends Job {
  readonly row: MediaScrapeRow;
}

/** The outbox's view of the scrapes table. */
export function scrapeQueue(db: Kysely<Database>): JobQueue<ScrapeStepJob> {
  return {
    claim: async (owner, now, leaseMs, _kinds, limit) => (await claimScrapes(db, owner, now, leaseMs, limit)).map((row) => ({ id: row.id, kind: SCRAPE_KIND, attempts: row.attempts, row })),
    release: (owner, now) => releaseScrapes(db, owner, now),
  };
}

export interface ScrapeJobOptions {
  pageSize?: number;
  /** Attempts of one page read before the scrape fails. */
  maxAttempts: number;
  retryBaseMs: number;
}

/**
 * The media archive's job kind: each step reads one page of the channel before the stored cursor,
 * indexes its media (downloading in `download` mode), and writes the items, the new cursor and the
 * counters in one transaction, so a restart resumes from the cursor and no item is indexed twice.
 * Requests go through the transport, which paces every one against the bot's shared budget and
 * Discord's per-route buckets.
 */
export class ScrapeJobs {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly pages: HistoryPages,
    private readonly downloader: MediaDownloader,
    private readonly media: MediaService,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly options: ScrapeJobOptions,
  ) {}

  kind(): JobKind<ScrapeStepJob> {
    // One step per scrape at a time: the lease is the scrape's; several scrapes share the pacer.
    return { kind: SCRAPE_KIND, concurrency: 2, retry: { maxAttempts: this.options.maxAttempts, baseMs: this.options.retryBaseMs }, handle: (job, context) => this.step(job.row, context) };
  }

  private async step(row: MediaScrapeRow, context: JobContext): Promise<void> {
    const log = this.log.child({ scrape_id: row.id });
    const pageSize = this.options.pageSize ?? SCRAPE_PAGE_SIZE;
    if (row.mode === 'download' && (await this.media.overrun())) {
      const paused = await pauseUnderLease(this.db, row.id, context.owner, 'storage limit reached: delete scrapes or raise HERALD_MEDIA_LIMIT_BYTES, then start again', this.clock.now());
      if (paused !== undefined) {
        log.warn('scrape paused: media storage past its overrun level');
        this.announce(paused);
      }
      return;
    }
    let messages;
    try {
      messages = await this.pages.pageBefore(row.channel_id, row.cursor ?? undefined, pageSize, context.signal);
    } catch (err) {
      const failure = err instanceof TransportError ? err.failure : { kind: 'transient' as const, detail: errorSummary(err) };
      const permanent = failure.kind !== 'transient' || row.attempts >= context.retry.maxAttempts;
      log.warn({ err: failure.detail, permanent }, 'scrape page read failed');
      const now = this.clock.now();
      const updated = await recordStepFailure(this.db, row.id, context.owner, {
        error: failure.detail,
        nextAt: context.retryAt(failure.kind === 'transient' ? failure.retryAfterMs : undefined),
        fail: permanent,
        now,
      });
      if (updated !== undefined) this.announce(updated);
      return;
    }
    const items: NewMediaItem[] = [];
    // A URL seen twice in one page is fetched once (its item is not indexed yet when the second comes).
    const fetched = new Map<string, Awaited<ReturnType<ScrapeJobs['fetch']>>>();
    let errors = 0;
    let lastError: string | null = null;
    for (const message of messages) {
      for (const found of mediaOf(message)) {
        let state: ItemState = 'linked';
        let sha256: string | null = null;
        let size = found.size;
        let contentType = found.contentType;
        let error: string | null = null;
        if (row.mode === 'download') {
          const stored = fetched.get(found.url) ?? (await this.fetch(found.url, context.signal));
          fetched.set(found.url, stored);
          if (stored.ok) {
            state = 'stored';
            sha256 = stored.sha256;
            size = stored.size;
            contentType = stored.contentType;
          } else {
            state = stored.refused ? 'refused' : 'failed';
            error = stored.reason;
            errors += 1;
            lastError = `${found.url.slice(0, 200)}: ${stored.reason}`;
          }
        }
        items.push({
          scrape_id: row.id,
          channel_id: row.channel_id,
          guild_id: row.guild_id,
          message_id: message.id,
          author_id: message.authorId,
          author_name: message.authorName,
          posted_at: message.createdAt,
          kind: found.kind,
          source: found.source,
          source_key: found.sourceKey,
          url: found.url,
          filename: found.filename,
          content_type: contentType,
          size_bytes: size,
          sha256,
          state,
          error,
          content: message.content,
        });
      }
    }
    const oldest = messages[messages.length - 1];
    const now = this.clock.now();
    const updated = await this.db.transaction().execute(async (trx) => {
      const added = await insertItems(trx, items);
      const recorded = await recordStep(trx, row.id, context.owner, {
        cursor: oldest?.id ?? row.cursor,
        messages: messages.length,
        items: added,
        errors,
        lastError,
        done: messages.length < pageSize,
        nextAt: now,
        now,
        countBytes: row.mode === 'download',
      });
      // The lease was lost (another worker took over): write nothing, the page is read again there.
      if (recorded === undefined) throw new LeaseLost();
      return recorded;
    }).catch((err: unknown) => {
      if (err instanceof LeaseLost) return undefined;
      throw err;
    });
    if (updated === undefined) {
      log.warn('scrape step finished after its lease was lost; the page is read again');
      return;
    }
    this.announce(updated);
    if (row.mode === 'download' && items.some((i) => i.sha256 !== null)) this.media.events.emit('storage', await this.media.storageStatus());
  }

  /** Fetch once per URL and once per content: a URL already fetched reuses its file. */
  private async fetch(url: string, signal: AbortSignal): Promise<{ ok: true; sha256: string; size: number; contentType: string } | { ok: false; refused: boolean; reason: string }> {
    const known = await blobForUrl(this.db, url);
    if (known !== undefined) return { ok: true, ...known };
    const got = await this.downloader.download(url, signal);
    if (got.ok) await insertBlob(this.db, { sha256: got.sha256, size: got.size, contentType: got.contentType, path: blobRelativePath(got.sha256), now: this.clock.now() });
    return got;
  }

  private announce(row: MediaScrapeRow): void {
    this.media.events.emit('scrape', toScrapeJob(row));
  }
}
