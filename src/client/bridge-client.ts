import createClient from 'openapi-fetch';
import type { components, paths } from '../../generated/api.js';

type Schemas = components['schemas'];
export type Capabilities = Schemas['Capabilities'];
export type DeliveryRequest = Schemas['DeliveryRequest'];
export type DeliveryState = Schemas['DeliveryState'];
export type DeliveryAccepted = Schemas['DeliveryAccepted'];
export type RecipientList = Schemas['RecipientList'];
export type Pairing = Schemas['Pairing'];
export type Registration = Schemas['Registration'];
export type CommandList = Schemas['CommandList'];
export type CommandDescription = Schemas['CommandDescription'];
export type CommandRunRequest = Schemas['CommandRunRequest'];
export type CommandRunResult = Schemas['CommandRunResult'];
export type GuildDestinations = Schemas['GuildDestinations'];
export type DeliveryDetail = Schemas['DeliveryDetail'];
export type HandoffRequest = Schemas['HandoffRequest'];
export type HandoffAccepted = Schemas['HandoffAccepted'];
export type SentHandoff = Schemas['SentHandoff'];
export type HandoffPage = Schemas['HandoffPage'];
export type InboxHandoff = Schemas['InboxHandoff'];
export type ScrapeJob = Schemas['ScrapeJob'];
export type MediaItem = Schemas['MediaItem'];
export type MediaPage = Schemas['MediaPage'];
export type StorageStatus = Schemas['StorageStatus'];
export type StartScrapeRequest = Schemas['StartScrapeRequest'];
export type MediaQuery = NonNullable<paths['/admin/archive/media']['get']['parameters']['query']>;
export type ChatTransport = Schemas['ChatTransport'];
export type ChatSendRequest = Schemas['ChatSendRequest'];
export type ChatSend = Schemas['ChatSend'];
export type ChatMessages = Schemas['ChatMessages'];
export type ChatChannel = Schemas['ChatChannel'];
export type ChatChannels = Schemas['ChatChannels'];
export type ChatMembers = Schemas['ChatMembers'];
export type StoredFile = Schemas['StoredFile'];
export type AttachmentDownloadRequest = Schemas['AttachmentDownloadRequest'];

/**
 * A call's outcome: the protocol's answer as data, never a thrown string. `status` 0 means the
 * bridge could not be reached (after the retries): `url` is where it was looked for, `cause` what
 * the network said (e.g. `connect ECONNREFUSED 127.0.0.1:8787`).
 */
export type BridgeResult<T> = { ok: true; status: number; data: T } | { ok: false; status: number; error: string; body?: unknown; url?: string; cause?: string };

/** Longest wait between two tries when retrying for a time (retryForMs). */
const MAX_TIMED_BACKOFF_MS = 2_000;

export interface BridgeClientOptions {
  /** Herald's base URL, e.g. http://127.0.0.1:8787 */
  baseUrl: string;
  /** MCP_BRIDGE_TOKEN */
  token: string;
  /** Retries of network errors and 5xx answers (default 4). */
  retries?: number;
  /** First backoff in ms; doubles each retry, with jitter (default 250). */
  backoffMs?: number;
  /**
   * Instead of a number of retries, keep retrying for this long (backoff capped at 2 s), so riding
   * out a bridge restart does not depend on how the jitter fell.
   */
  retryForMs?: number;
  /**
   * With retryForMs: while this client has not reached the bridge yet, or its last try found it
   * down, retry an unreachable bridge only this long, so a bridge that is not running is said at
   * once rather than waited for. retryForMs still rides out a restart of a bridge that was
   * answering. Default: retryForMs.
   */
  unreachableRetryForMs?: number;
  fetch?: typeof fetch;
  /** Extra headers on every request (e.g. `X-Herald-Client: mcp`, which labels the archive's action log). */
  headers?: Record<string, string>;
}

/**
 * The bridge protocol's client, typed from the contract (openapi-fetch over `generated/`). Network
 * errors and 5xx answers are retried with backoff, re-sending the very same request, so a delivery
 * keeps its request_id and the bridge answers a retry with the delivery already stored.
 */
export function createBridgeClient(options: BridgeClientOptions) {
  const retries = options.retries ?? 4;
  const backoffMs = options.backoffMs ?? 250;
  const baseFetch = options.fetch ?? fetch;
  // Whether the bridge answered the last time it was asked (anything, even a 5xx, is an answer).
  let answering = false;
  const retryingFetch = async (request: Request): Promise<Response> => {
    const started = Date.now();
    const retryForMs = answering ? options.retryForMs : (options.unreachableRetryForMs ?? options.retryForMs);
    for (let attempt = 0; ; attempt++) {
      const left = retryForMs === undefined ? Infinity : started + retryForMs - Date.now();
      const last = retryForMs === undefined ? attempt >= retries : left <= 0;
      const delay = retryForMs === undefined ? Math.random() * backoffMs * 2 ** attempt : Math.min(left, Math.random() * Math.min(MAX_TIMED_BACKOFF_MS, backoffMs * 2 ** attempt));
      try {
        const response = await baseFetch(request.clone());
        answering = true;
        if (response.status < 500 || last) return response;
      } catch (err) {
        if (last) {
          answering = false;
          throw err;
        }
      }
      await new Promise((r) => setTimeout(r, delay));
    }
  };
  const api = createClient<paths>({ baseUrl: options.baseUrl, headers: { ...(options.headers ?? {}), authorization: `Bearer ${options.token}` }, fetch: retryingFetch });

  /** `keepBody`: a refusal also carries its whole body (e.g. the archive's storage warning). */
  async function run<T>(call: () => Promise<{ data?: T; error?: unknown; response: Response }>, keepBody = false): Promise<BridgeResult<T>> {
    try {
      const { data, error, response } = await call();
      if (data !== undefined && response.ok) return { ok: true, status: response.status, data };
      if (response.status === 204) return { ok: true, status: 204, data: undefined as T };
      const reason = typeof error === 'object' && error !== null && 'error' in error ? String((error as { error: unknown }).error) : `HTTP ${response.status}`;
      return { ok: false, status: response.status, error: reason, ...(keepBody && typeof error === 'object' && error !== null ? { body: error } : {}) };
    } catch (err) {
      return { ok: false, status: 0, error: 'bridge unreachable', url: options.baseUrl, cause: networkCause(err) };
    }
  }

  return {
    capabilities: (include?: 'platforms') => run<Capabilities>(() => (include === undefined ? api.GET('/mcp/capabilities') : api.GET('/mcp/capabilities', { params: { query: { include } } }))),
    createDelivery: (body: DeliveryRequest) => run<DeliveryAccepted>(() => api.POST('/mcp/deliveries', { body })),
    getDelivery: (requestId: string) => run<DeliveryState>(() => api.GET('/mcp/deliveries/{request_id}', { params: { path: { request_id: requestId } } })),
    recipients: () => run<RecipientList>(() => api.GET('/mcp/recipients')),
    redeem: (code: string) => run<Pairing>(() => api.POST('/mcp/pair/redeem', { body: { code } })),
    registration: (userId: string) => run<Registration>(() => api.GET('/mcp/registration/{user_id}', { params: { path: { user_id: userId } } })),
    listCommands: () => run<CommandList>(() => api.GET('/mcp/commands')),
    describeCommand: (name: string) => run<CommandDescription>(() => api.GET('/mcp/commands/{name}', { params: { path: { name } } })),
    runCommand: (body: CommandRunRequest) => run<CommandRunResult>(() => api.POST('/mcp/commands/run', { body })),
    sendHandoff: (body: HandoffRequest) => run<HandoffAccepted>(() => api.POST('/mcp/handoffs', { body })),
    getHandoff: (requestId: string) => run<SentHandoff>(() => api.GET('/mcp/handoffs/{request_id}', { params: { path: { request_id: requestId } } })),
    listHandoffs: (query: { after?: string; limit?: string } = {}) => run<HandoffPage>(() => api.GET('/mcp/handoffs/inbox', { params: { query } })),
    /** Waits up to timeout_ms (at most 30 s) on the bridge for the next handoff. */
    waitForHandoff: (query: { after?: string; timeout_ms?: string } = {}) =>
      run<{ handoff: InboxHandoff | null }>(() => api.GET('/mcp/handoffs/inbox/next', { params: { query } })),
    ackHandoffs: (ids: string[]) => run<{ acknowledged: number }>(() => api.POST('/mcp/handoffs/inbox/ack', { body: { ids } })),
    listInbox: (query: { after?: string; limit?: string } = {}) => run<Schemas['InboxPage']>(() => api.GET('/mcp/inbox', { params: { query } })),
    /** Waits up to timeout_ms (at most 30 s) on the bridge for the next heard event. */
    waitForInbox: (query: { after?: string; timeout_ms?: string } = {}) => run<Schemas['InboxNext']>(() => api.GET('/mcp/inbox/next', { params: { query } })),
    ackInbox: (cursor: string) => run<Schemas['InboxAcked']>(() => api.POST('/mcp/inbox/ack', { body: { cursor } })),
    sendChatMessage: (body: ChatSendRequest) => run<ChatSend>(() => api.POST('/mcp/chat/messages', { body })),
    getChatMessage: (id: string) => run<ChatSend>(() => api.GET('/mcp/chat/messages/{id}', { params: { path: { id } } })),
    readChatMessages: (query: { channel: string; transport?: ChatTransport; since?: string; limit?: number }) =>
      run<ChatMessages>(() => api.GET('/mcp/chat/messages', { params: { query } })),
    createChatChannel: (body: { name: string; transport?: ChatTransport }) => run<ChatChannel>(() => api.POST('/mcp/chat/channels', { body })),
    listChatChannels: (query: { transport?: ChatTransport }) => run<ChatChannels>(() => api.GET('/mcp/chat/channels', { params: { query } })),
    getChatMembers: (query: { channel: string; transport?: ChatTransport }) => run<ChatMembers>(() => api.GET('/mcp/chat/members', { params: { query } })),
    // Read-only operator views the bridge token may read too (outside `/mcp/`, which they do not change).
    // Asked once, never retried: they add to an answer, and must not hold it up (e.g. a 503 while
    // HERALD_ADMIN_TOKEN is unset).
    /** Which destinations a guild has mapped: a post to any other fails. */
    guildDestinations: (guildId: string) =>
      run<GuildDestinations>(() => api.GET('/admin/destinations/{guild_id}', { params: { path: { guild_id: guildId } }, fetch: baseFetch })),
    /** Why a delivery failed or is unknown, in Herald's words (never its body). */
    deliveryDetail: (requestId: string) =>
      run<DeliveryDetail>(() => api.GET('/admin/deliveries/{request_id}', { params: { path: { request_id: requestId } }, fetch: baseFetch })),
    // The media archive (with the bridge token: the trusted tier; with the admin token: the admin tier).
    // Starting is asked once: a retry after a lost answer would be refused as already running anyway.
    startMediaScrape: (body: StartScrapeRequest) => run<ScrapeJob>(() => api.POST('/admin/archive/scrapes', { body, fetch: baseFetch }), true),
    listMediaScrapes: () => run<{ scrapes: ScrapeJob[] }>(() => api.GET('/admin/archive/scrapes')),
    getMediaScrape: (id: string) => run<ScrapeJob>(() => api.GET('/admin/archive/scrapes/{scrape_id}', { params: { path: { scrape_id: id } } })),
    stopMediaScrape: (id: string) => run<ScrapeJob>(() => api.POST('/admin/archive/scrapes/{scrape_id}/stop', { params: { path: { scrape_id: id } } })),
    deleteMediaScrape: (id: string) => run<void>(() => api.DELETE('/admin/archive/scrapes/{scrape_id}', { params: { path: { scrape_id: id } } })),
    queryMedia: (query: MediaQuery) => run<MediaPage>(() => api.GET('/admin/archive/media', { params: { query } })),
    getMediaItem: (id: string) => run<MediaItem>(() => api.GET('/admin/archive/media/{item_id}', { params: { path: { item_id: id } } })),
    getMediaStorage: () => run<StorageStatus>(() => api.GET('/admin/archive/storage')),
    // Files out and in: an upload is a raw body (its name in the query), retried as it is (the same bytes are the same file).
    uploadFile: (data: Uint8Array, filename: string, contentType = 'application/octet-stream') =>
      run<StoredFile>(() =>
        api.POST('/mcp/files', {
          params: { query: { filename } },
          body: data as never,
          bodySerializer: (b: unknown) => b as never,
          headers: { 'content-type': contentType },
        }),
      ),
    downloadAttachment: (body: AttachmentDownloadRequest) => run<StoredFile>(() => api.POST('/mcp/attachments/download', { body })),
  };
}

export type BridgeClient = ReturnType<typeof createBridgeClient>;

/** What the network said, from fetch's "fetch failed" down to the socket's error (ECONNREFUSED, ENOTFOUND, …). */
function networkCause(err: unknown): string {
  let deepest = 'no answer';
  for (let e: unknown = err, depth = 0; typeof e === 'object' && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { message, code } = e as { message?: unknown; code?: unknown };
    if (typeof message === 'string' && message !== '' && message !== 'fetch failed') deepest = message;
    else if (typeof code === 'string') deepest = code;
  }
  return deepest;
}
