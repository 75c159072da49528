import type { CallToolResult } from '@modelcontextprotocol/server';
import type { BridgeClient, BridgeResult, CallInput, Schema } from '../../client/bridge-client.js';
import type { operations } from '../../../generated/api.js';
import { bridgeError, contractSchema, hints, json, object, replayMarked, result, text, type McpTool } from '../../infra/mcp/tool.js';

/**
 * What these tools need from `herald mcp`: the bridge (the trusted tier) and, when the operator
 * gave `herald mcp` the admin token too, an admin client for download scrapes and deletes.
 */
export interface ArchiveToolDeps {
  bridge: BridgeClient;
  admin?: BridgeClient | undefined;
}

/** A refusal in words an agent can act on; the tier refusal says what would grant it (another 403, the operator's policy, says its rule). */
function refusal(r: BridgeResult<unknown> & { ok: false }): CallToolResult {
  if (r.status === 403 && r.error === 'admin token required') return text('This needs the admin tier: the operator must give herald mcp HERALD_ADMIN_TOKEN (download mode and delete are admin-only).', true);
  if (r.status === 404) return text(`Not found: ${r.error}.`, true);
  return bridgeError(r);
}

/**
 * The media archive's MCP tools (the names agents already use), thin wrappers over the archive's HTTP
 * operations, which are one MediaService: the same answers the web UI gets. Read tools answer from
 * the index only. Bytes are never returned: metadata, the original URL and the local path.
 */
export function archiveTools(): McpTool<ArchiveToolDeps>[] {
  const scrapeId = contractSchema('ScrapeId', 'A scrape id from scrape_media or list_media_scrapes.');
  return [
    {
      name: 'scrape_media',
      operations: ['startMediaScrape'],
      title: "Scrape a channel's media",
      annotations: hints(false, false, false, true),
      output: 'ScrapeJob',
      replay: { key: 'request_id' },
      description:
        'Start a scrape of one channel\'s media into the archive (or resume its stopped or paused scrape from where it stopped). mode "links" records metadata and original URLs; mode "download" also stores the files and needs the admin tier. One scrape per channel runs at a time. Give a request_id to retry safely: the same one again starts nothing and answers (replayed) the scrape it started; without one, each call is a new start (not idempotent). If storage is near its limit the answer is a warning: call again with confirm: true to go ahead. Follow progress with get_media_scrape.',
      inputSchema: { ...contractSchema('StartScrapeRequest'), type: 'object' },
      async handler(args, { bridge, admin }) {
        const body = args as unknown as Schema<'StartScrapeRequest'>;
        const client = body.mode === 'download' ? (admin ?? bridge) : bridge;
        const r = await client.call('startMediaScrape', { body }, { once: true, keepBody: true });
        if (r.ok) return replayMarked(json(r.data), r.data.existing === true, 'request_id', body.request_id ?? '');
        if (r.status === 428) {
          const warning = (r.body as { warning?: string } | undefined)?.warning ?? 'media storage is near its limit';
          return text(`Not started: ${warning}. Call scrape_media again with the same arguments and confirm: true to start anyway.`, true);
        }
        if (r.status === 409) return text(`A scrape of this channel is already running (${String((r.body as { scrapeId?: string } | undefined)?.scrapeId ?? '')}); see get_media_scrape, or stop it first.`, true);
        if (r.status === 422) return text('This request_id was already used to start a scrape of another channel or mode: give a new one.', true);
        return refusal(r);
      },
    },
    {
      name: 'list_media_scrapes',
      operations: ['listMediaScrapes'],
      title: 'Every media scrape',
      annotations: hints(true, false, true, false),
      output: 'listMediaScrapes',
      description: 'Every scrape with its state (running, paused, stopped, completed, failed), counters (messages seen, items found, bytes, errors) and size.',
      inputSchema: object({}),
      async handler(_args, { bridge }) {
        const r = await bridge.call('listMediaScrapes');
        return r.ok ? json(r.data) : refusal(r);
      },
    },
    {
      name: 'get_media_scrape',
      operations: ['getMediaScrape'],
      title: 'One media scrape',
      annotations: hints(true, false, true, false),
      output: 'ScrapeJob',
      description: 'One scrape with its live counters, cursor, state and pause reason.',
      inputSchema: object({ scrapeId }, ['scrapeId']),
      async handler(args, { bridge }) {
        const r = await bridge.call('getMediaScrape', { path: { scrape_id: String(args['scrapeId']) } });
        return r.ok ? json(r.data) : refusal(r);
      },
    },
    {
      name: 'stop_media_scrape',
      operations: ['stopMediaScrape'],
      title: 'Stop a media scrape',
      annotations: hints(false, false, true, false),
      output: 'ScrapeJob',
      replay: { natural: 'stopping a stopped scrape changes nothing' },
      description: 'Stop a running or paused scrape. scrape_media on the same channel and mode later resumes it from its cursor.',
      inputSchema: object({ scrapeId }, ['scrapeId']),
      async handler(args, { bridge }) {
        const r = await bridge.call('stopMediaScrape', { path: { scrape_id: String(args['scrapeId']) } });
        return r.ok ? json(r.data) : refusal(r);
      },
    },
    {
      name: 'query_media',
      operations: ['queryMedia'],
      title: 'Search archived media',
      annotations: hints(true, false, true, false),
      output: 'MediaPage',
      description:
        'Filter and page through archived media items, newest first: kind (image, video, audio, file), source (attachment, embed, link), scrapeId, channelId, guildId, author (user id), after/before (ISO times), text (words in the message). Pass nextCursor back as cursor for the next page. Each item has its author, time, message link, original URL and local path (download mode); never the bytes.',
      inputSchema: object({
        kind: contractSchema('MediaKind'),
        source: contractSchema('MediaSource'),
        scrapeId,
        channelId: contractSchema('ChannelId'),
        guildId: contractSchema('GuildId'),
        author: contractSchema('UserId', "The author's user id."),
        after: { type: 'string', description: 'Messages posted after this ISO-8601 time.' },
        before: { type: 'string', description: 'Messages posted before this ISO-8601 time.' },
        text: { type: 'string', minLength: 1, maxLength: 200, description: 'Words in the message content (case-insensitive).' },
        limit: { type: 'integer', minimum: 1, maximum: 200, description: 'Items per page (default 50).' },
        cursor: { type: 'string', description: 'nextCursor of the previous page.' },
      }),
      async handler(args, { bridge }) {
        const r = await bridge.call('queryMedia', { query: args as NonNullable<CallInput<operations['queryMedia']>['query']> });
        return r.ok ? json(r.data) : refusal(r);
      },
    },
    {
      name: 'get_media_item',
      operations: ['getMediaItem'],
      title: 'One archived media item',
      annotations: hints(true, false, true, false),
      output: 'MediaItem',
      description: 'One archived media item: source, message link, original URL, content type, size, SHA-256 and local path (never the bytes).',
      inputSchema: object({ itemId: { type: 'string', pattern: '^[0-9]{1,18}$', description: 'An item id from query_media.' } }, ['itemId']),
      async handler(args, { bridge }) {
        const r = await bridge.call('getMediaItem', { path: { item_id: String(args['itemId']) } });
        return r.ok ? json(r.data) : refusal(r);
      },
    },
    {
      name: 'get_media_storage',
      operations: ['getMediaStorage'],
      title: 'Media storage use',
      annotations: hints(true, false, true, false),
      output: 'StorageStatus',
      description: 'Stored bytes against the limit (level ok, warning or overrun), the warning and overrun percentages, per-kind bytes and per-scrape sizes.',
      inputSchema: object({}),
      async handler(_args, { bridge }) {
        const r = await bridge.call('getMediaStorage');
        return r.ok ? json(r.data) : refusal(r);
      },
    },
    {
      name: 'delete_media_scrape',
      operations: ['getMediaScrape', 'deleteMediaScrape'],
      title: 'Delete a media scrape and its files',
      annotations: hints(false, true, true, false),
      output: 'ScrapeJob',
      replay: { natural: 'a deleted scrape is gone: deleting it again is refused (not found) and changes nothing' },
      description: 'Delete a scrape, its index entries and its files (a file another scrape also references is kept). Admin tier. Answers with the scrape as it was just before.',
      inputSchema: object({ scrapeId }, ['scrapeId']),
      async handler(args, { bridge, admin }) {
        const id = String(args['scrapeId']);
        // The scrape as it was, for the structured answer (the delete itself answers 204, no body).
        const before = await bridge.call('getMediaScrape', { path: { scrape_id: id } });
        if (!before.ok) return refusal(before);
        const r = await (admin ?? bridge).call('deleteMediaScrape', { path: { scrape_id: id } });
        return r.ok ? result(`Deleted scrape ${id} and the files only it referenced.`, before.data) : refusal(r);
      },
    },
  ];
}
