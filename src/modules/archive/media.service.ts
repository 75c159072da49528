import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Clock } from '../../infra/clock.js';
import { DomainError, errorSummary, InvalidRequestError } from '../../infra/errors.js';
import type { ArchiveDb } from './archive.table.js';
import type { Channels } from '../../platforms/platform.js';
import {
  bytesByKind,
  deleteScrapeAndOrphans,
  findBlob,
  findItem,
  findScrape,
  insertAction,
  insertScrape,
  listActions,
  listScrapes,
  pruneActions,
  queryItems,
  releaseStorage,
  reserveStorage,
  resumableScrape,
  resumeScrape,
  runningScrapeOf,
  setScrapeState,
  usedBytes,
  type MediaFilter,
  type StepLease,
} from './archive.repository.js';
import { RETENTION_MS } from '../deliveries/index.js';
import { keyedWrite, scrapeOfRequest } from './scrape-requests.js';
import type { ArchiveActionTable, ScrapeMode } from './archive.table.js';
import type { StorageBudget } from './media.downloader.js';
import { toArchiveAction, toMediaItem, toScrapeJob, type ArchiveAction, type MediaItem, type ScrapeJob, type StorageStatus } from './media.js';

/** Who calls: the tier their token grants, their name in the action log, and how they came. */
export interface Actor {
  tier: 'admin' | 'trusted';
  /** e.g. admin, bridge, discord:<user id>. */
  name: string;
  via: ArchiveActionTable['via'];
}

export interface StorageLimits {
  limitBytes: number;
  warnPercent: number;
  overrunPercent: number;
}

export interface MediaServiceOptions {
  mediaDir: string;
  limits: StorageLimits;
  /** Where people open messages: https://discord.com, or the sandbox's origin. */
  messageLinkBase: string;
  /** Looks the channel up when a scrape starts (its guild, whether the bot sees it). */
  channels: Channels | undefined;
  /** Whether the platform can page through history (the transport's `pages` facet). */
  canScrape: boolean;
  /** Tell every process's scrape worker there is work (the doorbell). */
  wake: () => void;
  /** Tell every process (this one included) a scrape or the storage changed, after the commit; an id only. */
  publish?: (topic: ArchiveTopic, id?: string) => void;
  log: Logger;
}

export interface MediaQuery extends MediaFilter {
  limit?: number | undefined;
  cursor?: string | undefined;
}

export class AdminTierRequiredError extends DomainError {
  constructor() {
    super('admin token required');
  }
}
export class ConfirmRequiredError extends DomainError {
  constructor(
    readonly warning: string,
    readonly storage: StorageStatus,
  ) {
    super('confirm required');
  }
}
export class ScrapeRunningError extends DomainError {
  constructor(readonly scrapeId: string) {
    super('a scrape of this channel is already running');
  }
}
export class ChannelNotFoundError extends DomainError {
  constructor() {
    super('channel not found or not visible to the bot');
  }
}
export class PlatformUnavailableError extends DomainError {
  constructor() {
    super('platform unavailable');
  }
}
export class ScrapeNotFoundError extends DomainError {
  constructor() {
    super('scrape not found');
  }
}

/** What the service announces: a scrape changed; storage changed. */
export interface ArchiveEvents {
  scrape: [ScrapeJob];
  storage: [StorageStatus];
}

/** What the service publishes to the other processes: which scrape changed; that storage did. */
export type ArchiveTopic = 'archive.scrape' | 'archive.storage';

const DEFAULT_PAGE = 50;
const MAX_PAGE = 200;

/**
 * The media archive's one service, built once and handed to the HTTP handlers (which the MCP tools
 * and the web UI call) and the Discord commands: scrapes on the job queue, the index, storage
 * against its limit, trust tiers, and the action log of every change (and every refusal).
 */
export class MediaService {
  /** Scrape progress and storage, pushed as the job queue records each step (the UI's live view). */
  readonly events = new EventEmitter<ArchiveEvents>();

  constructor(
    private readonly db: Kysely<ArchiveDb>,
    private readonly clock: Clock,
    private readonly options: MediaServiceOptions,
  ) {
    this.events.setMaxListeners(100);
  }

  get mediaDir(): string {
    return this.options.mediaDir;
  }

  /**
   * Start a scrape, or resume the stopped or paused one of this channel and mode from its cursor.
   * `download` needs the admin tier; past the warning level it needs `confirm`. The same
   * `requestId` again answers the scrape it started or resumed (`existing`), starting nothing.
   */
  async startScrape(input: { channelId: string; mode: ScrapeMode; confirm?: boolean | undefined; /** Only a channel of this guild (a Discord command). */ guildId?: string | undefined; requestId?: string | undefined }, actor: Actor): Promise<{ scrape: ScrapeJob; resumed: boolean; existing?: boolean }> {
    return this.audited(actor, `start_scrape:${input.mode}`, input.channelId, async () => {
      if (input.mode === 'download' && actor.tier !== 'admin') throw new AdminTierRequiredError();
      if (!this.options.canScrape) throw new InvalidRequestError('this platform has no history to scrape');
      const earlier = input.requestId === undefined ? undefined : await scrapeOfRequest(this.db, input.requestId, input);
      if (earlier !== undefined) return { scrape: toScrapeJob(earlier), resumed: true, existing: true };
      const running = await runningScrapeOf(this.db, input.channelId);
      if (running !== undefined) throw new ScrapeRunningError(running.id);
      const storage = await this.storageStatus();
      if (storage.level !== 'ok' && input.confirm !== true) {
        const pct = storage.limitBytes === 0 ? 100 : Math.floor((storage.usedBytes / storage.limitBytes) * 100);
        throw new ConfirmRequiredError(`media storage is at ${pct}% of its limit (${storage.usedBytes} of ${storage.limitBytes} bytes; warning at ${storage.warnPercent}%, downloads pause at ${storage.overrunPercent}%): repeat with confirm true to start`, storage);
      }
      const now = this.clock.now();
      const stopped = await resumableScrape(this.db, input.channelId, input.mode);
      try {
        if (input.guildId !== undefined && stopped !== undefined && stopped.guild_id !== input.guildId) throw new ChannelNotFoundError();
        if (stopped !== undefined) {
          const resumed = await keyedWrite(this.db, input.requestId, now, (db) => resumeScrape(db, stopped.id, now));
          if (resumed !== undefined) return this.started(toScrapeJob(resumed), true);
        }
        const channel = await this.channel(input.channelId);
        if (input.guildId !== undefined && channel.guildId !== input.guildId) throw new ChannelNotFoundError();
        const row = await keyedWrite(this.db, input.requestId, now, (db) => insertScrape(db, { id: randomUUID(), channelId: input.channelId, channelName: channel.name ?? null, guildId: channel.guildId ?? null, mode: input.mode, now }));
        return this.started(toScrapeJob(row as NonNullable<typeof row>), false);
      } catch (err) {
        // The one-running-scrape index or the request_id: another start won the race (with this key: that start is this one).
        if (/media_scrapes_one_running|media_scrape_requests_pkey/.test(String((err as Error).message))) {
          const same = input.requestId === undefined ? undefined : await scrapeOfRequest(this.db, input.requestId, input);
          if (same !== undefined) return { scrape: toScrapeJob(same), resumed: true, existing: true };
          const winner = await runningScrapeOf(this.db, input.channelId);
          throw new ScrapeRunningError(winner?.id ?? '');
        }
        throw err;
      }
    });
  }

  private started(scrape: ScrapeJob, resumed: boolean): { scrape: ScrapeJob; resumed: boolean } {
    this.options.wake();
    this.scrapeChanged(scrape);
    return { scrape, resumed };
  }

  /**
   * A scrape's row changed (committed). Published, every process's streams (this one's too) read
   * it again from the database (`heard`); with nowhere to publish, it is pushed here as it is.
   */
  scrapeChanged(scrape: ScrapeJob): void {
    if (this.options.publish !== undefined) this.options.publish('archive.scrape', scrape.id);
    else this.events.emit('scrape', scrape);
  }

  /** The storage changed (committed): published like a scrape, or pushed here. */
  async storageChanged(): Promise<void> {
    if (this.options.publish !== undefined) this.options.publish('archive.storage');
    else if (this.events.listenerCount('storage') > 0) this.events.emit('storage', await this.storageStatus());
  }

  /**
   * A process (this one or another) changed scrapes (`ids`; undefined: any may have) or the
   * storage: read them again from the database and push them to this process's streams. Nothing
   * is read while no stream is open.
   */
  async heard(topic: ArchiveTopic, ids: readonly string[] | undefined): Promise<void> {
    if (topic === 'archive.storage') {
      if (this.events.listenerCount('storage') > 0) this.events.emit('storage', await this.storageStatus());
      return;
    }
    if (this.events.listenerCount('scrape') === 0) return;
    const rows = ids === undefined ? await listScrapes(this.db) : (await Promise.all(ids.map((id) => findScrape(this.db, id)))).filter((r) => r !== undefined);
    for (const row of rows) this.events.emit('scrape', toScrapeJob(row));
  }

  private async channel(channelId: string): Promise<{ guildId: string | undefined; name: string | undefined }> {
    const channels = this.options.channels;
    if (channels === undefined) return { guildId: undefined, name: undefined };
    let info;
    try {
      info = await channels.getChannel(channelId);
    } catch (err) {
      this.options.log.warn({ channel_id: channelId, err: errorSummary(err) }, 'channel lookup for a scrape failed');
      throw new PlatformUnavailableError();
    }
    if (info === undefined || !info.isText) throw new ChannelNotFoundError();
    return { guildId: info.guildId, name: info.name };
  }

  async getScrape(id: string, actor: Actor): Promise<ScrapeJob | null> {
    return this.read(actor, 'get_scrape', id, async () => {
      const row = await findScrape(this.db, id);
      return row === undefined ? null : toScrapeJob(row);
    });
  }

  async listScrapes(actor: Actor): Promise<ScrapeJob[]> {
    return this.read(actor, 'list_scrapes', null, async () => (await listScrapes(this.db)).map(toScrapeJob));
  }

  /** Stop a running or paused scrape; an ended one is answered as it is. */
  async stopScrape(id: string, actor: Actor): Promise<ScrapeJob> {
    return this.audited(actor, 'stop_scrape', id, async () => {
      const stopped = await setScrapeState(this.db, id, ['running', 'paused'], 'stopped', null, this.clock.now());
      const row = stopped ?? (await findScrape(this.db, id));
      if (row === undefined) throw new ScrapeNotFoundError();
      const job = toScrapeJob(row);
      if (stopped !== undefined) this.scrapeChanged(job);
      return job;
    });
  }

  /** Delete a scrape, its items and the files no other scrape references. Admin tier. */
  async deleteScrape(id: string, actor: Actor): Promise<void> {
    return this.audited(actor, 'delete_scrape', id, async () => {
      if (actor.tier !== 'admin') throw new AdminTierRequiredError();
      const orphans = await deleteScrapeAndOrphans(this.db, id);
      if (orphans === undefined) throw new ScrapeNotFoundError();
      for (const rel of orphans) await rm(path.join(this.options.mediaDir, rel), { force: true });
      await this.storageChanged();
    });
  }

  async queryMedia(query: MediaQuery, actor: Actor): Promise<{ items: MediaItem[]; nextCursor: string | null }> {
    return this.read(actor, 'query_media', query.scrapeId ?? query.channelId ?? null, async () => {
      const limit = Math.min(MAX_PAGE, Math.max(1, query.limit ?? DEFAULT_PAGE));
      const from = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
      const rows = await queryItems(this.db, query, from, limit + 1);
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        items: page.map((r) => toMediaItem(r, this.options.mediaDir, this.options.messageLinkBase)),
        nextCursor: rows.length > limit && last !== undefined ? encodeCursor(last.posted_at, String(last.id)) : null,
      };
    });
  }

  async getMediaItem(id: string, actor: Actor): Promise<MediaItem | null> {
    return this.read(actor, 'get_media_item', id, async () => {
      const row = await findItem(this.db, id);
      return row === undefined ? null : toMediaItem(row, this.options.mediaDir, this.options.messageLinkBase);
    });
  }

  /**
   * Used bytes against the limit, by kind and by scrape: the same numbers for the limit check, the
   * tools and the UI, read in one snapshot so the total and each scrape's bytes agree.
   */
  async storageStatus(): Promise<StorageStatus> {
    const { limitBytes, warnPercent, overrunPercent } = this.options.limits;
    const [used, byKind, scrapes] = await this.db
      .transaction()
      .setIsolationLevel('repeatable read')
      .execute(async (trx) => [await usedBytes(trx), await bytesByKind(trx), await listScrapes(trx)] as const);
    const level = used >= this.overrunBytes() ? 'overrun' : used >= (limitBytes * warnPercent) / 100 ? 'warning' : 'ok';
    return {
      usedBytes: used,
      limitBytes,
      warnPercent,
      overrunPercent,
      level,
      byKind,
      scrapes: scrapes.map((s) => ({ id: s.id, channelId: s.channel_id, bytes: Number(s.bytes), state: s.state, createdAt: s.created_at.toISOString() })),
    };
  }

  /** The level where downloads stop: stored bytes never pass it by a whole file. */
  private overrunBytes(): number {
    const { limitBytes, overrunPercent } = this.options.limits;
    return (limitBytes * overrunPercent) / 100;
  }

  async storage(actor: Actor): Promise<StorageStatus> {
    return this.read(actor, 'get_storage', null, () => this.storageStatus());
  }

  /** Whether downloads must pause: storage at or past the overrun level. */
  async overrun(): Promise<boolean> {
    return (await usedBytes(this.db)) >= this.overrunBytes();
  }

  /**
   * Room in storage for the files of one scrape step, held under the step's lease: every file is
   * reserved before it is written, in the database, so concurrent steps and processes together
   * pass the overrun level by less than one file.
   */
  storageBudget(scrapeId: string, lease: StepLease): StorageBudget {
    return {
      reserve: async (bytes) => {
        const reservation = randomUUID();
        const r = await reserveStorage(this.db, { id: reservation, scrapeId, lease, bytes, threshold: this.overrunBytes(), now: this.clock.now() });
        if (r.reserved) return { ok: true, reservation };
        return { ok: false, noRoom: r.usedBytes >= this.overrunBytes() ? 'full' : 'busy' };
      },
      release: (reservation) => releaseStorage(this.db, reservation),
    };
  }

  /** A stored file, for the operator UI's thumbnails. */
  async file(sha256: string): Promise<{ path: string; contentType: string } | undefined> {
    const blob = await findBlob(this.db, sha256);
    return blob === undefined ? undefined : { path: path.join(this.options.mediaDir, blob.path), contentType: blob.content_type };
  }

  /** The action log, newest first. */
  async actions(limit: number, cursor: string | undefined): Promise<{ actions: ArchiveAction[]; nextCursor: string | null }> {
    const rows = await listActions(this.db, cursor, limit + 1);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { actions: page.map(toArchiveAction), nextCursor: rows.length > limit && last !== undefined ? String(last.id) : null };
  }

  /** Forget action log entries older than Herald's records are kept (8 days, as deliveries and chat sends). */
  async pruneActions(): Promise<number> {
    return pruneActions(this.db, new Date(this.clock.now().getTime() - RETENTION_MS));
  }

  /**
   * A call that only reads: logged only when it was refused or failed. A read changes nothing, and
   * the UI and agents read all the time (a page load is three reads): the log is for changes.
   */
  private read<T>(actor: Actor, action: string, target: string | null, run: () => Promise<T>): Promise<T> {
    return this.audited(actor, action, target, run, { onlyIfNotOk: true });
  }

  /** Run one call and write who did what, when, and how it ended to the action log (a read: only when not ok). */
  private async audited<T>(actor: Actor, action: string, target: string | null, run: () => Promise<T>, options: { onlyIfNotOk?: boolean } = {}): Promise<T> {
    let result: 'ok' | 'refused' | 'error' = 'ok';
    let detail: string | null = null;
    try {
      return await run();
    } catch (err) {
      result = err instanceof DomainError ? 'refused' : 'error';
      detail = err instanceof DomainError ? err.reason : 'internal error';
      throw err;
    } finally {
      if (result !== 'ok' || options.onlyIfNotOk !== true) {
        await insertAction(this.db, { at: this.clock.now(), actor: actor.name, via: actor.via, action, target, result, detail }).catch((err: unknown) =>
          this.options.log.error({ err: errorSummary(err) }, 'could not write the archive action log'),
        );
      }
    }
  }
}

/** Cursors are opaque to callers: the last item's time and id. */
function encodeCursor(postedAt: Date, id: string): string {
  return Buffer.from(`${postedAt.getTime()}.${id}`).toString('base64url');
}

function decodeCursor(cursor: string): { postedAt: Date; id: string } {
  const m = /^([0-9]{1,15})\.([0-9]{1,18})$/.exec(Buffer.from(cursor, 'base64url').toString());
  if (m === null) throw new InvalidRequestError('cursor is not one this query returned');
  return { postedAt: new Date(Number(m[1])), id: m[2] as string };
}
