import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
// HTTP+SSE (the 2024-11-05 transport): the v2 SDK has no server transport for it, so that path
// stays on the 1.x SDK's; the server behind it is the same v2 one (createMcpServer).
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { createMcpHandler, type AuthInfo, type Server } from '@modelcontextprotocol/server';
import { serveStdio, StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { createBridgeClient, type BridgeClient } from '../client/bridge-client.js';
import type { Config } from '../config-types.js';
import { bearerCheck, FailureThrottle } from '../infra/http/auth.js';
import { CONFIRM_HEADER, POLICY_CLIENT_HEADER, policyRefusals } from '../infra/http/policy.middleware.js';
import { confirmKey } from '../infra/policy/confirm.js';
import { createMcpServer, inboxReadable, type McpServerDeps } from './server.js';
import { importRecordsFile, storeRecords } from './state.js';
import type { LocalFiles } from '../modules/deliveries/delivery.tool-files.js';
import { errorSummary } from '../infra/errors.js';
import { listenProblem, StartupError } from '../infra/startup.js';
import { metadataPath, oauthVerifier, resourceMetadata, tokenDigest, type OAuthSettings, type Principal } from './oauth.js';
import { loadOperatorPolicy, McpPolicy, type Caller } from './policy.js';
import { INBOX_EVENT_META, InboxFeed, inboxUri, notifyInbox, watchInbox } from './inbox-notify.js';
import { moduleContracts } from './tools.js';
import { readBody, sendWebResponse, webRequest } from './web.js';

/** The longest `subscriptions/listen` body read here (a filter of a few URIs). */
const LISTEN_BODY_LIMIT = 64 * 1024;

/** Listen streams (2026-07-28 `subscriptions/listen`) one caller may hold open at once on a replica. */
const MAX_LISTENS_PER_CALLER = 8;

/** HTTP+SSE sessions one token may hold open at once (each is a server, and maybe a poller on Herald). */
const MAX_SSE_SESSIONS_PER_TOKEN = 8;

/** How long a call retries a bridge this server has not reached yet (or found down last time). */
const UNREACHABLE_RETRY_MS = 2_000;

/** Labels this server's calls in the archive's action log. */
const MCP_CLIENT = { 'x-herald-client': 'mcp' };

function bridgeClient(config: Config, bridgeToken: string, headers: Record<string, string> = {}): BridgeClient {
  // Retries ride out a restart of a bridge that was answering: for as long as a tool waits for its
  // outcome, at least 30 s. A bridge not reached yet, or down at the last try, is said at once.
  return createBridgeClient({
    baseUrl: config.heraldUrl,
    token: bridgeToken,
    backoffMs: 250,
    retryForMs: Math.max(30_000, config.mcpWaitMs),
    unreachableRetryForMs: UNREACHABLE_RETRY_MS,
    headers: { ...MCP_CLIENT, ...headers },
    contracts: moduleContracts(),
  });
}

async function deps(config: Config, bridgeToken: string, log: Logger, localFiles: LocalFiles): Promise<McpServerDeps> {
  const bridge = bridgeClient(config, bridgeToken);
  // The records are Herald's (per caller); a file an older herald mcp kept them in is imported once.
  await importRecordsFile(config.mcpStatePath, (client) => (client === undefined ? bridge : bridgeClient(config, bridgeToken, { [POLICY_CLIENT_HEADER]: client })), log);
  return {
    localFiles,
    bridge,
    // The media archive's admin tier, only when the operator gave this server the admin token too.
    admin: config.adminToken === undefined ? undefined : createBridgeClient({ baseUrl: config.heraldUrl, token: config.adminToken, headers: MCP_CLIENT }),
    state: storeRecords(bridge, 'connector'),
    waitMs: config.mcpWaitMs,
    log,
  };
}

/** The operator's policy as this server applies it; its refusals counted (herald_policy_refusals_total, surface mcp). */
async function mcpPolicy(config: Config, registry: Registry, bridgeToken: string): Promise<McpPolicy> {
  const refusals = policyRefusals(registry);
  return new McpPolicy(await loadOperatorPolicy(config), (rule) => refusals.inc({ rule, surface: 'mcp' }), confirmKey(bridgeToken));
}

/** The caller's tools' dependencies with their bridge calls carrying a confirm token (a confirmed call's). */
function confirming(config: Config, bridgeToken: string, base: McpServerDeps, caller: Caller): (token: string) => McpServerDeps {
  return (token) => ({ ...base, bridge: bridgeClient(config, bridgeToken, { ...(caller.client === undefined ? {} : { [POLICY_CLIENT_HEADER]: caller.client }), [CONFIRM_HEADER]: token }) });
}

/**
 * `herald mcp`: MCP over stdio (stdout is the protocol; logs go to stderr). The v2 SDK's entry
 * picks the revision from the client's opening: 2026-07-28 when it asks (server/discover), else the
 * 2025 `initialize` handshake, one server for the connection either way.
 */
export async function runStdio(config: Config, bridgeToken: string, log: Logger): Promise<void> {
  const policy = await mcpPolicy(config, new Registry(), bridgeToken);
  // stdio: the person who started this process; a path is theirs to give.
  const base = await deps(config, bridgeToken, log, { kind: 'any' });
  const wire = new StdioServerTransport();
  const stops = new Set<() => void>();
  // The connection's 2026-07-28 server, for the inbox's resources/updated (the SDK's stdio entry
  // hands them to the listen streams that asked for the URI, and drops the rest).
  let modern: Server | undefined;
  let watching = false;
  serveStdio(
    ({ era }): Server => {
      const server = createMcpServer(base, { policy, caller: {}, confirmed: confirming(config, bridgeToken, base, {}) }, era);
      if (era === 'modern') {
        modern = server;
        server.onclose = () => {
          if (modern === server) modern = undefined;
        };
      }
      // The inbox's notifications are log messages pushed outside any request: a 2025 connection's,
      // once it is initialized (2026-07-28 has no such channel).
      if (era === 'legacy' && config.mcpInboxNotify) {
        server.oninitialized = () => {
          const stop = notifyInbox(server, { baseUrl: config.heraldUrl, token: bridgeToken }, log);
          stops.add(stop);
          server.onclose = () => {
            stop();
            stops.delete(stop);
          };
        };
      }
      return server;
    },
    { transport: wire, onerror: (err) => log.debug({ err: err.name }, 'mcp stdio message refused') },
  );
  // The first listen to the inbox starts watching it (through Herald's API) for the rest of the
  // connection: until then nothing waits on it. stdio has one caller, the connector.
  const entry = wire.onmessage;
  wire.onmessage = (message) => {
    if (!watching && isInboxListen(message)) {
      watching = true;
      const uri = inboxUri(undefined);
      stops.add(watchInbox({ baseUrl: config.heraldUrl, token: bridgeToken }, (event) => modern?.sendResourceUpdated({ uri, _meta: { [INBOX_EVENT_META]: { ...event } } }).catch(() => undefined), log));
    }
    entry?.(message);
  };
  // The entry owns the transport's close: chained, so the end of stdin ends this process's wait too.
  const closed = new Promise<void>((resolve) => {
    const entry = wire.onclose;
    wire.onclose = () => {
      entry?.();
      resolve();
    };
  });
  log.info({ bridge: config.heraldUrl }, 'herald mcp serving on stdio');
  await closed;
  for (const stop of stops) stop();
}

/** Whether a message is a `subscriptions/listen` naming the connector's inbox. */
function isInboxListen(message: unknown): boolean {
  const m = message as { method?: unknown; params?: { notifications?: { resourceSubscriptions?: unknown } } } | null;
  const wanted = m?.params?.notifications?.resourceSubscriptions;
  return m?.method === 'subscriptions/listen' && Array.isArray(wanted) && wanted.includes(inboxUri(undefined));
}

/** Whether a principal's token has expired (the static token never does). */
const lapsed = (p: Principal): boolean => p.expiresAt !== undefined && p.expiresAt <= Date.now();

/** Loopback origins (a local inspector, a desktop app's web view) are always allowed. */
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

function originAllowed(origin: string, allowed: readonly string[]): boolean {
  if (allowed.includes(origin)) return true;
  try {
    return LOOPBACK.has(new URL(origin).hostname);
  } catch {
    return false;
  }
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
};

export interface HttpMcp {
  url: string;
  server: HttpServer;
  /** herald_policy_refusals_total and the like, of this server. */
  registry: Registry;
}

/**
 * `herald mcp --http`: MCP over Streamable HTTP at /mcp, and the deprecated HTTP+SSE transport
 * (GET /sse, POST /messages) for older clients. /mcp keeps nothing between requests, so any replica
 * answers any request: 2026-07-28 is stateless by design (each request carries its revision and
 * the client's capabilities in `_meta`), and the 2025 revisions are served stateless too (the v2
 * SDK's stateless fallback: a fresh server per request, no Mcp-Session-Id issued, so there is no
 * session for a replica to know or verify). Only an HTTP+SSE session lives in one process (its
 * stream is held open there): it needs a sticky route to that replica. Both are served
 * on the same port and token; on loopback unless HOST says otherwise. Every request is checked in
 * the spec's order: its Origin (403 for a browser origin not allowed: DNS rebinding), then its
 * bearer token (the static HERALD_MCP_TOKEN, or in OAuth mode an access token of the operator's
 * issuer), failed attempts throttled per address as the API's are.
 */
export async function startHttp(config: Config, bridgeToken: string, mcpToken: string, log: Logger): Promise<HttpMcp> {
  // OAuth's audience is one URL for the whole service: without HERALD_MCP_RESOURCE it would be this
  // process's own address, which a client reaches only on loopback, and which differs between
  // replicas (a token minted for the load balancer's URL would fail on every one of them).
  if (config.mcpOAuthIssuer !== undefined && config.mcpResource === undefined && !LOOPBACK.has(config.host) && config.host !== '::1') {
    throw new StartupError(
      `HERALD_MCP_RESOURCE must be set with HERALD_MCP_OAUTH_ISSUER when HOST is not loopback (HOST=${config.host}): it is the audience every access token must name, the URL clients reach this server at (behind a load balancer, its URL, the same on every replica)`,
    );
  }
  // Over HTTP a path is a remote caller's word: read only inside the folder the operator named.
  const shared = await deps(config, bridgeToken, log, config.mcpFilesDir === undefined ? { kind: 'none' } : { kind: 'folder', dir: config.mcpFilesDir });
  const registry = new Registry();
  const policy = await mcpPolicy(config, registry, bridgeToken);
  const staticToken = bearerCheck(mcpToken);
  const throttle = new FailureThrottle();
  // Each OAuth client's calls carry its id to Herald, so its rules hold on the bridge too; and it has
  // its own records (pairing, messages, edit seqs): another client's message is one it never sent.
  const clients = new Map<string, McpServerDeps>();
  const depsFor = (caller: Caller): McpServerDeps => {
    if (caller.client === undefined) return shared;
    let d = clients.get(caller.client);
    if (d === undefined) {
      const bridge = bridgeClient(config, bridgeToken, { [POLICY_CLIENT_HEADER]: caller.client });
      d = { ...shared, state: storeRecords(bridge, 'client'), bridge };
      clients.set(caller.client, d);
    }
    return d;
  };
  let oauth: (OAuthSettings & { verify: (token: string) => Promise<Principal | undefined>; metadataPath: string }) | undefined;
  /** Old HTTP+SSE sessions, by session id, with the principal that opened them. */
  const sessions = new Map<string, { transport: SSEServerTransport; principal: Principal }>();

  const authenticate = async (req: IncomingMessage): Promise<Principal | undefined> => {
    const header = req.headers.authorization;
    if (staticToken(header)) return { token: tokenDigest(header?.slice('Bearer '.length) ?? '') };
    if (oauth !== undefined && header?.startsWith('Bearer ') === true) return oauth.verify(header.slice('Bearer '.length));
    return undefined;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // A request-target no URL parser takes (`//[`) is the client's error, said before anything else.
    if (!URL.canParse(req.url ?? '/', 'http://localhost')) return json(res, 400, { error: 'invalid request target' });
    const url = new URL(req.url ?? '/', 'http://localhost');
    const origin = req.headers.origin;
    if (origin !== undefined && !originAllowed(origin, config.mcpAllowedOrigins)) return json(res, 403, { error: 'origin not allowed' });
    if (oauth !== undefined && req.method === 'GET' && (url.pathname === oauth.metadataPath || url.pathname === '/.well-known/oauth-protected-resource')) {
      return json(res, 200, resourceMetadata(oauth));
    }
    if (url.pathname !== '/mcp' && url.pathname !== '/sse' && url.pathname !== '/messages') return json(res, 404, { error: 'not found' });
    const caller = await authenticate(req);
    if (caller === undefined || lapsed(caller)) {
      const challenge = oauth === undefined ? 'Bearer' : `Bearer resource_metadata="${new URL(oauth.metadataPath, oauth.resource).href}", scope="read write admin"`;
      // Only a token that was tried is a failed guess: a request with none asks for the challenge
      // that starts OAuth discovery, and behind a shared proxy others' wrong tokens must not keep a
      // new client from it. The 429 carries the challenge too.
      if (req.headers.authorization !== undefined) {
        const verdict = throttle.fail(req.socket.remoteAddress ?? 'unknown');
        if (verdict.limited) return json(res, 429, { error: 'too many failed attempts' }, { 'retry-after': String(verdict.retryAfterSeconds), 'www-authenticate': challenge });
      }
      return json(res, 401, { error: 'unauthorized' }, { 'www-authenticate': challenge });
    }
    // A confirmed call is the caller's too: its records, not the connector's.
    const access = { policy, caller, confirmed: confirming(config, bridgeToken, depsFor(caller), caller) };
    if (url.pathname === '/sse') {
      if (req.method !== 'GET') return json(res, 405, { error: 'method not allowed' });
      // Each session is a server (and with HERALD_MCP_INBOX_NOTIFY a poller on Herald): a token holds a few at most.
      const open = [...sessions.values()].filter((session) => session.principal.token === caller.token).length;
      if (open >= MAX_SSE_SESSIONS_PER_TOKEN) return json(res, 429, { error: `too many open HTTP+SSE sessions for this token (at most ${MAX_SSE_SESSIONS_PER_TOKEN}); close one first` }, { 'retry-after': '30' });
      const transport = new SSEServerTransport('/messages', res);
      sessions.set(transport.sessionId, { transport, principal: caller });
      // Every call on the session is checked against the token that opened it: lapsed, it is refused.
      const mcp = createMcpServer(depsFor(caller), { ...access, lapsed: () => lapsed(caller) });
      let stopNotifying: (() => void) | undefined;
      // The session ends when its token expires: nothing more is pushed to it (inbox notifications).
      const expiry = caller.expiresAt === undefined ? undefined : setTimeout(() => res.end(), Math.max(0, caller.expiresAt - Date.now()));
      expiry?.unref();
      // The stream's end ends the session (closing the server closes the transport, once).
      res.on('close', () => {
        clearTimeout(expiry);
        sessions.delete(transport.sessionId);
        stopNotifying?.();
        void mcp.close();
      });
      await mcp.connect(transport);
      if (config.mcpInboxNotify) stopNotifying = notifyInbox(mcp, { baseUrl: config.heraldUrl, token: bridgeToken, ...(caller.client === undefined ? {} : { headers: { [POLICY_CLIENT_HEADER]: caller.client } }) }, log);
      return;
    }
    if (url.pathname === '/messages') {
      const session = sessions.get(url.searchParams.get('sessionId') ?? '');
      // A session is its opener's principal: only the very token that opened it (so the same client,
      // subject, scopes and expiry) posts into it; another client's, or a downgraded token, cannot.
      if (session === undefined || session.principal.token !== caller.token) return json(res, 404, { error: 'unknown session' });
      await session.transport.handlePostMessage(req, res);
      return;
    }
    // The caller rides to the handler's factory in the request's authInfo (the SDK passes it through
    // untouched, to both revisions' legs): its server is built with its policy and its records. The
    // token there is its digest: the token itself goes no further.
    const make = (era: 'legacy' | 'modern'): Server => createMcpServer(depsFor(caller), access, era);
    const authInfo: AuthInfo = { token: caller.token, clientId: caller.client ?? 'connector', scopes: [...(caller.scopes ?? [])], extra: { make } };
    // 2026-07-28's `subscriptions/listen` (its Mcp-Method header says so, and the SDK refuses a
    // request whose header and body disagree): checked and accounted here, before the SDK acks it.
    if (req.method === 'POST' && req.headers['mcp-method'] === 'subscriptions/listen') return listen(req, res, caller, authInfo);
    await sendWebResponse(await mcpHandler.fetch(webRequest(req, res), { authInfo }), res);
  };

  /**
   * A listen stream: its resources only the caller's own inbox (the SDK would honor any URI, so
   * another client's inbox is refused here, naming the field); while it is open this replica
   * watches that inbox through Herald's API (InboxFeed); it ends when the caller's token expires.
   */
  const listen = async (req: IncomingMessage, res: ServerResponse, caller: Principal, authInfo: AuthInfo): Promise<void> => {
    const body = await readBody(req, LISTEN_BODY_LIMIT);
    if (body === undefined) return json(res, 413, { error: 'request body too large' });
    let message: unknown;
    try {
      message = JSON.parse(body);
    } catch {
      return json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error: the body is not JSON' } });
    }
    const m = message as { id?: unknown; params?: { notifications?: { resourceSubscriptions?: unknown } } } | null;
    const id = typeof m?.id === 'string' || typeof m?.id === 'number' ? m.id : null;
    const wanted = m?.params?.notifications?.resourceSubscriptions;
    const own = inboxUri(caller.client);
    const others = Array.isArray(wanted) ? wanted.filter((u) => u !== own) : [];
    if (others.length > 0) {
      return json(res, 400, { jsonrpc: '2.0', id, error: { code: -32602, message: `Invalid params: notifications.resourceSubscriptions: ${String(others[0]).slice(0, 200)} is not this caller's; its inbox is ${own}.` } });
    }
    if (Array.isArray(wanted) && wanted.length > 0 && !inboxReadable({ policy, caller })) {
      return json(res, 400, { jsonrpc: '2.0', id, error: { code: -32602, message: `Invalid params: notifications.resourceSubscriptions: the operator's policy does not let this caller read its inbox (list_inbox).` } });
    }
    // One caller holds a few listen streams at most: the SDK's limit on open streams is one pool for
    // every caller, which one client's unread streams would otherwise fill for all.
    const principal = caller.client === undefined ? 'connector' : `client:${caller.client}`;
    if ((listening.get(principal) ?? 0) >= MAX_LISTENS_PER_CALLER) {
      return json(res, 429, { jsonrpc: '2.0', id, error: { code: -32000, message: `Too many open listen streams for this caller (at most ${MAX_LISTENS_PER_CALLER}); close one first.` } }, { 'retry-after': '30' });
    }
    listening.set(principal, (listening.get(principal) ?? 0) + 1);
    const expired = new AbortController();
    // setTimeout holds at most 2^31-1 ms (about 24 days): a later expiry ends the stream then (the client listens again).
    const expiry = caller.expiresAt === undefined ? undefined : setTimeout(() => expired.abort(), Math.min(2 ** 31 - 1, Math.max(0, caller.expiresAt - Date.now())));
    expiry?.unref();
    const release = Array.isArray(wanted) && wanted.includes(own) ? feed.open(own, { baseUrl: config.heraldUrl, token: bridgeToken, ...(caller.client === undefined ? {} : { headers: { [POLICY_CLIENT_HEADER]: caller.client } }) }) : undefined;
    try {
      await sendWebResponse(await mcpHandler.fetch(webRequest(req, res, { body, signal: expired.signal }), { authInfo, parsedBody: message }), res);
    } finally {
      clearTimeout(expiry);
      release?.();
      const left = (listening.get(principal) ?? 1) - 1;
      if (left > 0) listening.set(principal, left);
      else listening.delete(principal);
    }
  };
  /** Open listen streams by caller (`connector`, or `client:<id>`). */
  const listening = new Map<string, number>();

  const feed = new InboxFeed(log);

  const mcpHandler = createMcpHandler(
    ({ authInfo, era }) => {
      const make = authInfo?.extra?.['make'];
      if (typeof make !== 'function') throw new Error('an MCP request that was not authenticated');
      return (make as (era: 'legacy' | 'modern') => Server)(era);
    },
    { onerror: (err) => log.debug({ err: err.name }, 'mcp request refused'), bus: feed },
  );

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log.error({ err: errorSummary(err) }, 'mcp request failed');
      if (!res.headersSent) json(res, 500, { error: 'internal error' });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(listenProblem(err, config.host, config.mcpPort, 'HERALD_MCP_PORT') ?? err));
    server.listen(config.mcpPort, config.host, () => resolve());
  });
  const url = `http://${config.host}:${(server.address() as AddressInfo).port}/mcp`;
  if (config.mcpOAuthIssuer !== undefined) {
    const settings = { issuer: config.mcpOAuthIssuer, jwksUrl: config.mcpOAuthJwksUrl ?? `${config.mcpOAuthIssuer}/.well-known/jwks.json`, resource: config.mcpResource ?? url };
    oauth = { ...settings, verify: oauthVerifier(settings), metadataPath: metadataPath(settings.resource) };
    if (config.mcpResource === undefined) {
      log.warn({ resource: url }, "HERALD_MCP_RESOURCE is not set: OAuth tokens must name this process's own URL as their audience; set HERALD_MCP_RESOURCE to the URL clients use (the same on every replica behind a load balancer)");
    }
  }
  log.info({ url, bridge: config.heraldUrl, oauth: oauth?.issuer }, 'herald mcp serving Streamable HTTP (and HTTP+SSE at /sse)');
  return { url, server, registry };
}
