import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { afterFailure } from '../../outbox/failure-rule.js';
import type { Job, JobContext, JobKind, JobQueue } from '../../outbox/worker.js';
import type { Clock } from '../../infra/clock.js';
import type { ArchiveDb } from './archive.table.js';
import type { HistoryPages } from '../../platforms/platform.js';
import { blobForUrl, commitStoredItem, insertItems, pauseUnderLease, recordStep, recordStepFailure, scrapesTable } from './archive.repository.js';
import type { ItemState, MediaScrapeRow, NewMediaItem } from './archive.table.js';
import { mediaOf, toScrapeJob } from './media.js';
import type { MediaDownloader, StorageBudget } from './media.downloader.js';
import type { MediaService } from './media.service.js';

/** The scrape job kind on the outbox: one step reads one page of history. */
export const SCRAPE_KIND = 'media_scrape';

/** Messages per step: Discord's largest page. */
export const SCRAPE_PAGE_SIZE = 100;

class LeaseLost extends Error {}

/** A URL's file for a step: stored (a new file to commit, or one stored before), refused or failed, or no room. */
type Fetched =
  | { ok: true; sha256: string; size: number; contentType: string; file: { size: number; contentType: string; path: string; reservation: string } | undefined }
  | { ok: false; refused: boolean; reason: string }
  | { ok: false; noRoom: 'full' | 'busy' };

/** A scrape row is its own outbox job. */
export interface ScrapeStepJob extends Job {
  readonly row: MediaScrapeRow;
}

/** The outbox's view of the scrapes table. */
export function scrapeQueue(db: Kysely<ArchiveDb>): JobQueue<ScrapeStepJob> {
  const table = scrapesTable(db);
  return {
    name: table.name,
    oldestDue: (now) => table.oldestDue(now),
    claim: async (owner, now, leaseMs, _kinds, limit) => (await table.claim(owner, now, leaseMs, limit)).map((row) => ({ id: row.id, kind: SCRAPE_KIND, attempts: row.attempts, leaseToken: row.lease_token, row })),
    release: (owner, now) => table.release(owner, now),
    quarantine: (job, lease, reason) => table.finish(job.id, lease, { state: 'failed', last_error: reason, finished_at: new Date() }),
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
    private readonly db: Kysely<ArchiveDb>,
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
      const paused = await pauseUnderLease(this.db, row.id, context.lease, 'storage limit reached: delete scrapes or raise HERALD_MEDIA_LIMIT_BYTES, then start again', this.clock.now());
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
      const verdict = afterFailure(err, row.attempts, context.retry.maxAttempts);
      const { failure } = verdict;
      const permanent = verdict.next !== 'retry';
      log.warn({ err: failure.detail, permanent }, 'scrape page read failed');
      const now = this.clock.now();
      const updated = await recordStepFailure(this.db, row.id, context.lease, {
        error: failure.detail,
        nextAt: context.retryAt(failure.kind === 'transient' ? failure.retryAfterMs : undefined),
        fail: permanent,
        now,
      });
      if (updated !== undefined) this.announce(updated);
      return;
    }
    const items: NewMediaItem[] = [];
    // The claim's lease: rows are claimed with one, so a step always has it.
    const budget = this.media.storageBudget(row.id, { owner: context.owner, expiresAt: row.lease_expires_at ?? this.clock.now() });
    // A URL seen twice in one page is fetched once.
    const fetched = new Map<string, Fetched>();
    let errors = 0;
    let lastError: string | null = null;
    // Messages fully indexed. A download step ends early, recording them, when storage has no room
    // for the next file, or when its lease is about to end after some progress (the rest of a slow
    // page is read again by the next step, not recorded as failed downloads).
    let read = 0;
    let cut: 'full' | 'busy' | 'lease' | undefined;
    const leaseEnding = (): boolean => row.mode === 'download' && read > 0 && context.signal.aborted;
    pageLoop: for (const message of messages) {
      if (leaseEnding()) {
        cut = 'lease';
        break;
      }
      const mine: NewMediaItem[] = [];
      for (const found of mediaOf(message)) {
        const item: NewMediaItem = {
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
          content_type: found.contentType,
          size_bytes: found.size,
          sha256: null,
          state: 'linked',
          error: null,
          content: message.content,
        };
        if (row.mode === 'download') {
          const got = fetched.get(found.url) ?? (await this.fetch(found.url, context.signal, budget));
          if ('noRoom' in got) {
            cut = got.noRoom;
            break pageLoop;
          }
          if (!got.ok && leaseEnding()) {
            cut = 'lease';
            break pageLoop;
          }
          if (got.ok) {
            const stored = { ...item, state: 'stored' as ItemState, sha256: got.sha256, size_bytes: got.size, content_type: got.contentType };
            // The file and its item are written together, under the lease: storage and the scrape's counters agree at every instant.
            const committed = await commitStoredItem(this.db, { scrapeId: row.id, owner: context.owner, now: this.clock.now(), item: stored, file: got.file });
            // Its file's row exists now: the same URL again (in this page) is a known file.
            fetched.set(found.url, { ok: true, sha256: got.sha256, size: got.size, contentType: got.contentType, file: undefined });
            if (!committed) {
              if (got.file !== undefined) await budget.release(got.file.reservation).catch(() => undefined);
              log.warn('scrape step lost its lease while storing files; the page is read again');
              return;
            }
            mine.push(stored);
          } else {
            fetched.set(found.url, got);
            errors += 1;
            lastError = `${found.url.slice(0, 200)}: ${got.reason}`;
            mine.push({ ...item, state: got.refused ? 'refused' : 'failed', error: got.reason });
          }
        } else {
          mine.push(item);
        }
      }
      items.push(...mine);
      read += 1;
    }
    const last = messages[read - 1];
    const now = this.clock.now();
    const full = cut === 'full' ? 'storage limit reached: delete scrapes or raise HERALD_MEDIA_LIMIT_BYTES, then start again' : undefined;
    const updated = await this.db.transaction().execute(async (trx) => {
      const added = await insertItems(trx, items);
      const recorded = await recordStep(trx, row.id, context.lease, {
        cursor: last?.id ?? row.cursor,
        messages: read,
        items: added,
        errors,
        lastError,
        done: cut === undefined && messages.length < pageSize,
        pause: full,
        // Room taken only by downloads in flight elsewhere: try again once they have settled.
        nextAt: cut === 'busy' ? new Date(now.getTime() + this.options.retryBaseMs) : now,
        now,
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
    if (full !== undefined) log.warn('scrape paused: no room left in media storage');
    this.announce(updated);
    if (row.mode === 'download' && (cut === 'full' || items.some((i) => i.sha256 !== null))) await this.media.storageChanged();
  }

  /**
   * Fetch once per URL and once per content: a URL already fetched reuses its file, a new one is
   * downloaded against the step's room in storage. `file` is set when the download wrote a file
   * (to be committed with its reservation).
   */
  private async fetch(url: string, signal: AbortSignal, budget: StorageBudget): Promise<Fetched> {
    const known = await blobForUrl(this.db, url);
    if (known !== undefined) return { ok: true, ...known, file: undefined };
    const got = await this.downloader.download(url, signal, budget);
    if (!got.ok) return got;
    return { ok: true, sha256: got.sha256, size: got.size, contentType: got.contentType, file: { size: got.size, contentType: got.contentType, path: got.path, reservation: got.reservation } };
  }

  private announce(row: MediaScrapeRow): void {
    this.media.scrapeChanged(toScrapeJob(row));
  }
}
