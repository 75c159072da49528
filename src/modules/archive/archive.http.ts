import { createReadStream } from 'node:fs';
import type { ServerResponse } from 'node:http';
import Router from '@koa/router';
import type { Context as KoaContext } from 'koa';
import { InvalidRequestError } from '../../infra/errors.js';
import type { OperationHandlers } from '../../infra/http/api.js';
import { reply } from '../../infra/http/reply.js';
import type { ItemState, MediaKind } from './archive.table.js';
import {
  AdminTierRequiredError,
  ChannelNotFoundError,
  ConfirmRequiredError,
  PlatformUnavailableError,
  ScrapeNotFoundError,
  ScrapeRunningError,
  type Actor,
  type MediaService,
} from './media.service.js';
import { ScrapeRequestReusedError } from './scrape-requests.js';

/**
 * The caller's tier from the token the API middleware accepted: the admin token is the admin
 * tier, the bridge token the trusted one. `X-Herald-Client` (mcp, ui) only labels the action log.
 */
export function actorOf(koa: KoaContext): Actor {
  const admin = koa.state['authenticated'] === 'admin';
  const client = koa.get('x-herald-client');
  return { tier: admin ? 'admin' : 'trusted', name: admin ? 'admin' : 'bridge', via: client === 'mcp' || client === 'ui' ? client : 'http' };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
/** A list parameter, as the router parsed it (`state=refused,failed`). */
const strings = (v: unknown): string[] | undefined => (Array.isArray(v) ? v.map(String) : typeof v === 'string' ? [v] : undefined);

/** The archive's operations, each one call of the MediaService. */
export function archiveOperations(media: MediaService): OperationHandlers {
  return (kit) => ({
    listMediaScrapes: async (_c, _b, koa) => reply('listMediaScrapes', 200, { scrapes: await media.listScrapes(actorOf(koa)) }),
    startMediaScrape: async (_c, body, koa) => {
      kit.checkBody('startMediaScrape', body);
      const input = body as { channelId: string; mode: 'links' | 'download'; confirm?: boolean; request_id?: string };
      try {
        const { scrape, resumed, existing } = await media.startScrape({ ...input, requestId: input.request_id }, actorOf(koa));
        const answer = { ...scrape, existing: existing === true };
        return resumed ? reply('startMediaScrape', 200, answer) : reply('startMediaScrape', 201, answer);
      } catch (err) {
        if (err instanceof AdminTierRequiredError) return reply('startMediaScrape', 403, { error: 'admin token required' });
        if (err instanceof ConfirmRequiredError) return reply('startMediaScrape', 428, { error: 'confirm required', warning: err.warning, storage: err.storage });
        if (err instanceof ScrapeRunningError) return reply('startMediaScrape', 409, { error: 'a scrape of this channel is already running', scrapeId: err.scrapeId });
        if (err instanceof ScrapeRequestReusedError) return reply('startMediaScrape', 422, { error: 'request_id was already used for a different scrape' });
        if (err instanceof ChannelNotFoundError) return reply('startMediaScrape', 404, { error: 'channel not found or not visible to the bot' });
        if (err instanceof PlatformUnavailableError) return reply('startMediaScrape', 503, { error: 'platform unavailable' });
        throw err;
      }
    },
    getMediaScrape: async (c, _b, koa) => {
      const scrape = await media.getScrape(String(c.request.params['scrape_id']), actorOf(koa));
      return scrape === null ? reply('getMediaScrape', 404, { error: 'scrape not found' }) : reply('getMediaScrape', 200, scrape);
    },
    stopMediaScrape: async (c, _b, koa) => {
      try {
        return reply('stopMediaScrape', 200, await media.stopScrape(String(c.request.params['scrape_id']), actorOf(koa)));
      } catch (err) {
        if (err instanceof ScrapeNotFoundError) return reply('stopMediaScrape', 404, { error: 'scrape not found' });
        throw err;
      }
    },
    deleteMediaScrape: async (c, _b, koa) => {
      try {
        await media.deleteScrape(String(c.request.params['scrape_id']), actorOf(koa));
        return { status: 204 };
      } catch (err) {
        if (err instanceof AdminTierRequiredError) return reply('deleteMediaScrape', 403, { error: 'admin token required' });
        if (err instanceof ScrapeNotFoundError) return reply('deleteMediaScrape', 404, { error: 'scrape not found' });
        throw err;
      }
    },
    queryMedia: async (c, _b, koa) => {
      const q = c.request.query;
      const date = (v: unknown, name: string): Date | undefined => {
        if (typeof v !== 'string') return undefined;
        const d = new Date(v);
        if (Number.isNaN(d.getTime())) throw new InvalidRequestError(`${name} must be an ISO-8601 time`);
        return d;
      };
      const limit = str(q['limit']);
      const page = await media.queryMedia(
        {
          kind: str(q['kind']) as MediaKind | undefined,
          source: str(q['source']),
          scrapeId: str(q['scrapeId']),
          channelId: str(q['channelId']),
          guildId: str(q['guildId']),
          author: str(q['author']),
          after: date(q['after'], 'after'),
          before: date(q['before'], 'before'),
          text: str(q['text']),
          state: strings(q['state']) as ItemState[] | undefined,
          limit: limit === undefined ? undefined : Number(limit),
          cursor: str(q['cursor']),
        },
        actorOf(koa),
      );
      return reply('queryMedia', 200, page);
    },
    getMediaItem: async (c, _b, koa) => {
      const item = await media.getMediaItem(String(c.request.params['item_id']), actorOf(koa));
      return item === null ? reply('getMediaItem', 404, { error: 'media item not found' }) : reply('getMediaItem', 200, item);
    },
    getMediaStorage: async (_c, _b, koa) => reply('getMediaStorage', 200, await media.storage(actorOf(koa))),
    listArchiveActions: async (c) => {
      const limit = str(c.request.query['limit']);
      return reply('listArchiveActions', 200, await media.actions(limit === undefined ? 50 : Number(limit), str(c.request.query['cursor'])));
    },
  });
}

/** Raster image types a browser renders passively (no script, no links): the only images served inline. */
const RASTER_IMAGES = new Set(['image/png', 'image/apng', 'image/jpeg', 'image/gif', 'image/webp', 'image/avif', 'image/bmp']);

/**
 * Whether a stored file may be shown by the browser (raster images, audio, video) rather than
 * saved: SVG and every other type is active or unknown content, served as an attachment.
 */
export function servedInline(contentType: string): boolean {
  const type = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  return RASTER_IMAGES.has(type) || /^(audio|video)\/[a-z0-9.+-]+$/.test(type);
}

/** How often an idle event stream says it is alive (proxies close silent connections). */
const KEEPALIVE_MS = 15_000;

/**
 * Routes outside the JSON API (the contract documents them): the live event stream (server-sent
 * events, pushed as the job queue records each step) and stored files for the UI's thumbnails.
 * The API middleware has authenticated them already; both need the admin tier.
 */
export function archiveRoutes(media: MediaService): { router: Router; closeStreams(): void } {
  const router = new Router();
  /** Open event streams: ended at shutdown, or the server would wait for them forever. */
  const streams = new Set<ServerResponse>();
  const adminOnly = (ctx: KoaContext): boolean => {
    if (ctx.state['authenticated'] === 'admin') return true;
    ctx.status = 403;
    ctx.body = { error: 'admin token required' };
    return false;
  };
  router.get('/admin/archive/events', (ctx) => {
    if (!adminOnly(ctx)) return;
    // Written straight to the socket: an event stream has no end for Koa to pipe to.
    ctx.status = 200;
    ctx.respond = false;
    const res = ctx.res;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no', 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' });
    const send = (event: string, data: unknown): void => void res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    const onScrape = (s: unknown): void => send('scrape', s);
    const onStorage = (s: unknown): void => send('storage', s);
    media.events.on('scrape', onScrape);
    media.events.on('storage', onStorage);
    const keepalive = setInterval(() => res.write(': keepalive\n\n'), KEEPALIVE_MS);
    streams.add(res);
    res.on('close', () => {
      streams.delete(res);
      clearInterval(keepalive);
      media.events.off('scrape', onScrape);
      media.events.off('storage', onStorage);
    });
    res.write(': connected\n\n');
  });
  router.get('/admin/archive/files/:sha256', async (ctx) => {
    if (!adminOnly(ctx)) return;
    const sha = ctx.params['sha256'] ?? '';
    const file = /^[0-9a-f]{64}$/.test(sha) ? await media.file(sha) : undefined;
    if (file === undefined) {
      ctx.status = 404;
      ctx.body = { error: 'file not found' };
      return;
    }
    ctx.set({
      'content-type': file.contentType,
      // Anything but a raster image, audio or video (SVG, HTML, PDF, …) is a download, never a page of this origin.
      'content-disposition': servedInline(file.contentType) ? 'inline' : `attachment; filename="${sha}"`,
      'cache-control': 'private, max-age=86400',
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'; sandbox",
      'referrer-policy': 'no-referrer',
    });
    ctx.body = createReadStream(file.path);
  });
  return {
    router,
    closeStreams: () => {
      for (const res of streams) res.end();
    },
  };
}
