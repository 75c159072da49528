import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import Koa from 'koa';
import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import path from 'node:path';
import { archiveOperations, archiveRoutes } from './modules/archive/archive.http.js';
import { registerArchiveMetrics } from './modules/archive/archive.metrics.js';
import { archiveTotals } from './modules/archive/archive.repository.js';
import { DISCORD_MEDIA_HOSTS, MediaDownloader } from './modules/archive/media.downloader.js';
import { MediaService } from './modules/archive/media.service.js';
import { ScrapeJobs, scrapeQueue, type ScrapeStepJob } from './modules/archive/scrape.jobs.js';
import { archiveUiRoutes } from './web/archive-ui.js';
import { pruneCommandRuns } from './modules/commands/command-run.repository.js';
import { commandOperations } from './modules/commands/command.http.js';
import { CommandService, type ReplyPoster } from './modules/commands/command.service.js';
import { commandRouter, COMMAND_DEFINITIONS } from './modules/commands/registry.js';
import { deliveryAdminOperations } from './modules/deliveries/delivery.admin.http.js';
import { deliveryOperations } from './modules/deliveries/delivery.http.js';
import { declareSendKinds, deliveryPorts } from './send-wiring.js';
import { DELIVERY_KINDS, DeliveryJobs, deliveryQueue, type DeliveryJob } from './modules/deliveries/delivery.jobs.js';
import { DeliveryMetrics } from './modules/deliveries/delivery.metrics.js';
import { DELIVERY_CHANNEL, nonceLedger, notifyDue, recordSentMessage } from './modules/deliveries/delivery.repository.js';
import { Doorbell } from './platform/db/doorbell.js';
import { pacerFor, type Pacer } from './platform/db/shared-pacer.js';
import { DeliveryService, type KindSupport } from './modules/deliveries/delivery.service.js';
import { destinationOperations } from './modules/destinations/destination.http.js';
import { DestinationService } from './modules/destinations/destination.service.js';
import { identityOperations } from './modules/identity/identity.http.js';
import { IdentityMetrics } from './modules/identity/identity.metrics.js';
import { IdentityService } from './modules/identity/identity.service.js';
import { registerOutboxHealth, WorkerMetrics } from './outbox/outbox.metrics.js';
import { OutboxWorker } from './outbox/worker.js';
import { systemClock, type Clock } from './platform/clock.js';
import { openStore, retryWhileUnreachable, type Store } from './platform/db/database.js';
import { migrateToLatest } from './platform/db/migrate.js';
import { errorSummary } from './platform/errors.js';
import { createApi } from './platform/http/api.js';
import { docsRouter } from './platform/http/docs.js';
import { HttpMetrics } from './platform/http/http.metrics.js';
import { serveMetrics } from './platform/http/metrics-server.js';
import { probeOperations, type Readiness } from './platform/http/probes.js';
import { createLogger } from './platform/log.js';
import { createRegistry, type Registry } from './platform/metrics.js';
import { discordTokenRejected, listenProblem } from './platform/startup.js';
import type { Database } from './schema.js';
import { DiscordTokenRejectedError, DiscordTransport } from './transports/discord/discord-transport.js';
import { LinkMetrics, PlatformMetrics } from './transports/discord/discord.metrics.js';
import { DiscordInvokers } from './transports/discord/invokers.js';
import { connectGateway, GatewayInbound, type GatewayConnection } from './transports/discord/gateway-client.js';
import { handoffOperations } from './modules/handoffs/handoff.http.js';
import { HandoffMetrics } from './modules/handoffs/handoff.metrics.js';
import { pruneInbox } from './modules/handoffs/handoff.repository.js';
import { HandoffService } from './modules/handoffs/handoff.service.js';
import { capabilitiesOf, transportsOf, type Channels, type Transport } from './transports/transport.js';
import { chatOperations } from './modules/chat/chat.http.js';
import { ChatJobs, chatQueue, type ChatJob } from './modules/chat/chat.jobs.js';
import { ChatService } from './modules/chat/chat.service.js';
import type { IrcTransport } from './transports/irc/irc-transport.js';

/** Discord's global rate limit: requests per second per bot. */
const DISCORD_GLOBAL_LIMIT = 50;

export interface HeraldOptions {
  config: Config;
  clock?: Clock;
  log?: Logger;
  /** What this process does: serve HTTP, dispatch deliveries, or both (the default). */
  roles?: { http: boolean; dispatcher: boolean };
  /** Sandbox mode: the sandbox's origin, where people open the messages Herald delivered. */
  messageLinkBase?: string;
  /** Sandbox mode: the sandbox's origin, the one private origin the media archive may download from. */
  mediaOrigins?: readonly string[];
}

export interface Herald {
  /** The API's base URL, when serving HTTP. */
  readonly url: string | undefined;
  readonly store: Store<Database>;
  /** The outbox worker, when this process dispatches. */
  readonly worker: OutboxWorker<DeliveryJob> | undefined;
  /** The media archive's service (the same one the HTTP API answers with). */
  readonly media: MediaService;
  /** Every metric this process exports. */
  readonly registry: Registry;
  /** Base URL of `/metrics` and the status page, unless HERALD_METRICS_PORT is off. */
  readonly metricsUrl: string | undefined;
  /** Stop serving, stop claiming, finish or release in-flight jobs, close the store. */
  close(): Promise<void>;
}

const PRUNE_EVERY_MS = 60 * 60 * 1000;
/** Acknowledged handoffs are kept this long, then pruned. */
const HANDOFF_INBOX_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
/** How long a nonce report from the gateway waits for an unreachable database before it is dropped. */
const NONCE_REPORT_RETRY_MS = 60_000;
/** At most this long to ask Discord whether it accepts the token before starting anyway. */
const TOKEN_CHECK_MS = 10_000;

/**
 * Wiring only: open the store, build each service once, and hand them to the HTTP API, the
 * gateway's command router and the outbox worker. Needs a Discord token (sandbox mode passes the
 * sandbox's, see cli.ts).
 */
export async function startHerald(options: HeraldOptions): Promise<Herald> {
  const { config } = options;
  const startedAt = new Date();
  const clock = options.clock ?? systemClock;
  const log = options.log ?? createLogger(config.logLevel);
  const roles = options.roles ?? { http: true, dispatcher: true };
  const token = config.discordToken;
  if (token === undefined) throw new Error('DISCORD_TOKEN is not set (herald serve starts the built-in sandbox when it is unset)');
  // Built once; each module defines its own metrics on it.
  const registry = createRegistry();
  const deliveryMetrics = new DeliveryMetrics(registry);
  const links = new LinkMetrics(registry);
  const cleanups: (() => Promise<void>)[] = [];
  const close = async (): Promise<void> => {
    for (const cleanup of cleanups.splice(0).reverse()) {
      await cleanup().catch((err: unknown) => log.error({ err: errorSummary(err) }, 'shutdown step failed'));
    }
  };

  // A token Discord rejects stops start-up, before the store opens; Discord not answering does not
  // (deliveries wait for it), so that is only logged.
  // Paced once the store is open (the budget lives there); the token check before it goes alone.
  let pacer: Pacer | undefined;
  const discord = new DiscordTransport({
    token,
    apiUrl: config.discordApiUrl,
    timeoutMs: config.discordTimeoutMs,
    pace: async (signal) => pacer?.acquire(signal),
    metrics: new PlatformMetrics(registry),
    chatGuildId: config.discordChatGuild,
  });
  try {
    await discord.verifyToken(AbortSignal.timeout(Math.min(config.discordTimeoutMs, TOKEN_CHECK_MS)));
  } catch (err) {
    if (err instanceof DiscordTokenRejectedError) {
      log.error({ status: err.status, code: err.code }, 'Discord rejected DISCORD_TOKEN');
      throw discordTokenRejected(err.status, err);
    }
    log.warn({ err: errorSummary(err) }, 'could not check DISCORD_TOKEN with Discord; starting anyway');
  }

  try {
    const store = await openStore<Database>({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      poolSize: config.dbPoolSize,
      onConnectionError: (err) => log.warn({ err: err.message }, 'database connection lost; it is replaced on next use'),
      log,
    });
    cleanups.push(() => store.close());
    // PostgreSQL may still be starting (or recovering) when Herald starts: wait for it, bounded.
    await migrateToLatest(store.db, { startupTimeoutMs: config.dbStartupTimeoutMs, databaseUrl: config.databaseUrl, log });
    log.info({ store: store.kind }, 'store ready');

    // Discord's global rate limit belongs to the bot, so every process sending as it shares one budget.
    pacer = pacerFor({ kind: store.kind, db: store.db as unknown as Kysely<unknown> }, `discord:${createHash('sha256').update(token).digest('hex').slice(0, 16)}`, {
      perSecond: config.discordPerSecond,
      windowLimit: DISCORD_GLOBAL_LIMIT,
    });
    discord.useNonceLedger(nonceLedger(store.db));
    const transport: Transport = discord;
    // IRC beside Discord, when configured: its observer reads its channels into the store.
    let irc: IrcTransport | undefined;
    if (config.irc !== undefined) {
      // Loaded only when configured: irc-framework stays out of a Discord-only start-up.
      const { parseIrcUrl } = await import('./transports/irc/irc-connection.js');
      const { IrcMetrics, IrcTransport } = await import('./transports/irc/irc-transport.js');
      const server = parseIrcUrl(config.irc.url);
      if (server === undefined) throw new Error('HERALD_IRC_URL must be irc://host:port or ircs://host:port');
      const ircTransport = new IrcTransport({
        server,
        nick: config.irc.nick,
        saslPassword: config.irc.password,
        channels: config.irc.channels,
        db: store.db,
        log: log.child({ transport: 'irc' }),
        metrics: new IrcMetrics(registry),
        linesPerSecond: config.irc.linesPerSecond,
        echoTimeoutMs: config.irc.echoTimeoutMs,
        senderIdleMs: config.irc.senderIdleMs,
        retention: { maxAgeMs: config.irc.retentionDays * 24 * 60 * 60 * 1000, perChannel: config.irc.retentionLines },
        // Like Discord's gateway nonces: which line a delivery's key created, for reconciliation.
        onOwnLine: (key, channel, msgid, at) => retryWhileUnreachable(() => recordSentMessage(store.db, key, channel, msgid, at), NONCE_REPORT_RETRY_MS),
      });
      cleanups.push(() => ircTransport.close());
      links.track('irc', 'observer', () => ircTransport.up);
      log.info({ host: server.host, port: server.port, tls: server.tls, nick: config.irc.nick }, 'connecting to IRC');
      await ircTransport.start();
      irc = ircTransport;
    }
    const transports = irc === undefined ? transportsOf(transport) : transportsOf(transport, irc);
    // The protocol's capabilities (and the MCP tools, through them) come from what the transport can do.
    const can = capabilitiesOf(transport);
    const capabilities: KindSupport = {
      post: can.send,
      dm: can.dm && !config.disabledKinds.includes('dm'),
      edit: can.edit && !config.disabledKinds.includes('edit'),
    };
    if (transport.channels === undefined) throw new Error(`the ${transport.name} transport cannot look up channels, which destinations need`);
    // New deliveries wake this process's dispatcher at once and, through one coalesced NOTIFY after
    // their commit, the dispatchers of other processes (PGlite has no other processes).
    const doorbell = new Doorbell(store.kind === 'postgres' ? () => notifyDue(store.db) : async () => undefined);
    const deliveries = new DeliveryService(store.db, clock, capabilities, {
      announce: () => doorbell.ring(),
      // PGlite is one session: one statement at a time whatever we do.
      maxInFlight: store.kind === 'postgres' ? Math.max(1, Math.floor(config.dbPoolSize / 4)) : 1,
    });
    const destinations = new DestinationService(store.db, { name: transport.name, channels: loggedChannels(transport.channels, log) }, clock, irc);
    const identity = new IdentityService(store.db, clock);
    // Handoffs are sent as deliveries (kind handoff) and received from the gateway's Inbound facet.
    const selfIdOf = transport.history;
    const handoffs = new HandoffService(store.db, deliveries, clock, {
      limits: config.handoffs,
      selfId: () => (selfIdOf !== undefined ? selfIdOf.selfId() : Promise.reject(new Error(`the ${transport.name} transport does not say who the bot is`))),
      canSend: can.send && can.channels,
      log,
      metrics: new HandoffMetrics(registry),
    });

    // The media archive: one service for the HTTP API (which the MCP tools and the web UI call).
    let scrapeWorker: OutboxWorker<ScrapeStepJob> | undefined;
    const mediaDir = path.join(config.dataDir, 'media');
    const media = new MediaService(store.db, clock, {
      mediaDir,
      limits: config.media,
      messageLinkBase: options.messageLinkBase ?? 'https://discord.com',
      channels: transport.channels,
      canScrape: transport.pages !== undefined,
      wake: () => scrapeWorker?.wake(),
      log,
    });
    registerArchiveMetrics(registry, () => archiveTotals(store.db));

    const queue = deliveryQueue(store.db, deliveryMetrics);
    // Every role reports the outbox it shares (one database): dashboards take the max across processes.
    const depth = queue.depth;
    if (depth !== undefined) registerOutboxHealth(registry, depth, clock, { kinds: DELIVERY_KINDS });

    let worker: OutboxWorker<DeliveryJob> | undefined;
    if (roles.dispatcher) {
      const jobs = new DeliveryJobs(store.db, transports, clock, log, deliveryMetrics, {
        nonceWindowMs: config.nonceWindowMs,
        maxAttempts: config.maxAttempts,
        retryBaseMs: config.retryBaseMs,
        leaseMs: config.leaseMs,
      }, deliveryPorts(store.db));
      declareSendKinds(jobs);
      const w = new OutboxWorker(queue, clock, log, {
        leaseMs: config.leaseMs,
        pollMs: config.pollMs,
        concurrency: config.dispatchConcurrency,
        shutdownGraceMs: config.shutdownGraceMs,
        pruneEveryMs: PRUNE_EVERY_MS,
        metrics: new WorkerMetrics(registry),
      });
      for (const kind of jobs.kinds()) w.register(kind);
      // LISTEN heals itself after a lost connection; polling covers any gap.
      const unlisten = await store.listen(DELIVERY_CHANNEL, () => w.wake());
      cleanups.push(unlisten);
      const unring = doorbell.onRing(() => w.wake());
      cleanups.push(async () => void unring());
      w.start();
      cleanups.push(() => w.stop());
      worker = w;
      if (transport.pages !== undefined) {
        // Scrapes are their own outbox (the scrapes table); each step reads one page, paced like every Discord request.
        const downloader = new MediaDownloader(mediaDir, {
          hosts: DISCORD_MEDIA_HOSTS,
          trustedOrigins: options.mediaOrigins ?? [],
          maxBytes: config.media.maxFileBytes,
          timeoutMs: config.discordTimeoutMs,
        });
        const scrapes = new ScrapeJobs(store.db, transport.pages, downloader, media, clock, log, { maxAttempts: config.maxAttempts, retryBaseMs: config.retryBaseMs });
        const sw = new OutboxWorker(scrapeQueue(store.db), clock, log, { leaseMs: config.leaseMs, pollMs: config.pollMs, concurrency: 2, shutdownGraceMs: config.shutdownGraceMs });
        sw.register(scrapes.kind());
        sw.start();
        cleanups.push(() => sw.stop());
        scrapeWorker = sw;
      }
      // The chat tools' sends: their own table and worker, on the same outbox machinery.
      const chatJobs = new ChatJobs(store.db, transports, clock, log, { maxAttempts: config.maxAttempts, retryBaseMs: config.retryBaseMs });
      const cw = new OutboxWorker<ChatJob>(chatQueue(store.db), clock, log, {
        leaseMs: config.leaseMs,
        pollMs: config.pollMs,
        concurrency: config.dispatchConcurrency,
        shutdownGraceMs: config.shutdownGraceMs,
        pruneEveryMs: PRUNE_EVERY_MS,
      });
      for (const kind of chatJobs.kinds()) cw.register(kind);
      const unringChat = doorbell.onRing(() => cw.wake());
      cleanups.push(async () => void unringChat());
      cw.start();
      cleanups.push(() => cw.stop());
    }

    // Who invokes a command and what Herald itself may do in a channel, fetched through Herald's own
    // Discord session; one command router for the gateway and run_command, so they cannot differ.
    const invokers = new DiscordInvokers({ token, apiUrl: config.discordApiUrl, timeoutMs: config.discordTimeoutMs });
    cleanups.push(() => invokers.destroy());
    const router = commandRouter({ identity, destinations, media }, (guildId, channelId) => invokers.botCanPost(guildId, channelId));

    let gateway: GatewayConnection | undefined;
    if (roles.http && config.gateway) {
      links.track('discord', 'gateway', () => gateway?.ready === true);
      try {
        log.info('connecting to the Discord gateway');
        // Messages others write reach handoffs only while some bot is trusted.
        const inbound = handoffs.enabled ? new GatewayInbound() : undefined;
        if (inbound !== undefined) inbound.onMessage((m) => handoffs.take(m));
        gateway = await connectGateway({
          ...(inbound !== undefined ? { inbound } : {}),
          token,
          apiUrl: config.discordApiUrl,
          commands: { definitions: COMMAND_DEFINITIONS, run: (invocation) => router.run(invocation) },
          log,
          onOwnMessage: (m) => retryWhileUnreachable(() => recordSentMessage(store.db, m.nonce, m.channelId, m.messageId, m.createdAt), NONCE_REPORT_RETRY_MS),
        });
        const g = gateway;
        cleanups.push(() => g.close());
      } catch (err) {
        // Deliveries do not need the gateway: keep serving, and say so in /readyz.
        log.error({ err: errorSummary(err) }, 'gateway unavailable; slash commands will not be answered');
      }
    }

    let url: string | undefined;
    let api: { host: string; port: number; pages: { title: string; path: string }[] } | undefined;
    if (roles.http) {
      const readiness: Readiness = async () => {
        const checks: Record<string, string> = {};
        try {
          await sql`select 1`.execute(store.db);
          checks['database'] = 'ok';
        } catch {
          checks['database'] = 'unavailable';
        }
        if (worker !== undefined) checks['dispatcher'] = worker.running ? 'ok' : 'stopped';
        // The worker's LISTEN session: while it reconnects, new deliveries wait for polling.
        if (worker !== undefined) checks['listen'] = store.listening() ? 'ok' : 'unavailable';
        if (config.gateway) checks['gateway'] = gateway?.ready === true ? 'ok' : 'unavailable';
        if (irc !== undefined) checks['irc'] = irc.up ? 'ok' : 'unavailable';
        return checks;
      };
      // responseMode discord: each reply is queued in the outbox under an id derived from the
      // idempotency key, so a repeat (a retry, a re-run after a crash) is the same delivery, sent once.
      const postReply: ReplyPoster = async (requestId, guildId, channelId, content) =>
        void (await deliveries.enqueueReply({ request_id: requestId, kind: 'reply', target: { guild_id: guildId, channel_id: channelId }, body: { content } }));
      const commands = new CommandService(router, invokers, store.db, clock, config.commands, log, postReply);
      const pruneRuns = setInterval(() => {
        pruneCommandRuns(store.db, clock.now()).catch((err: unknown) => log.warn({ err: errorSummary(err) }, 'could not prune command runs'));
        pruneInbox(store.db, new Date(clock.now().getTime() - HANDOFF_INBOX_RETENTION_MS)).catch((err: unknown) => log.warn({ err: errorSummary(err) }, 'could not prune the handoff inbox'));
        media.pruneActions().catch((err: unknown) => log.warn({ err: errorSummary(err) }, 'could not prune the archive action log'));
      }, PRUNE_EVERY_MS);
      pruneRuns.unref();
      cleanups.push(async () => clearInterval(pruneRuns));
      const httpMetrics = new HttpMetrics(registry);
      const middleware = await createApi({
        bridgeToken: config.bridgeToken,
        adminToken: config.adminToken,
        log,
        onAuthFailure: (area, throttled) => httpMetrics.authFailure(area, throttled),
        operations: [
          deliveryOperations(deliveries, capabilities, deliveryMetrics),
          deliveryAdminOperations(deliveries, { messageLinkBase: options.messageLinkBase }),
          identityOperations(identity, new IdentityMetrics(registry)),
          destinationOperations(destinations),
          commandOperations(commands as CommandService<unknown>, log),
          handoffOperations(handoffs),
          chatOperations(new ChatService(store.db, transports, config.chatTransport, clock, { announce: () => doorbell.ring() })),
          probeOperations(readiness),
          archiveOperations(media),
        ],
      });
      const archive = archiveRoutes(media);
      const server = await serveHttp(config, middleware, log, httpMetrics, [archive.router, archiveUiRoutes()]);
      // Stop accepting requests first (cleanups run in reverse), after ending the archive's event
      // streams, which would otherwise keep the server open.
      cleanups.push(() => closeServer(server));
      cleanups.push(async () => archive.closeStreams());
      const address = server.address() as AddressInfo;
      url = `http://${config.host}:${address.port}`;
      // The pages an operator opens, linked from the status page on the metrics port.
      api = { host: config.host, port: address.port, pages: [{ title: 'API docs', path: '/docs' }, { title: 'Media archive', path: '/ui/archive' }] };
    }
    let metricsUrl: string | undefined;
    if (config.metricsPort !== undefined) {
      const metricsServer = await serveMetrics(registry, config.metricsHost, config.metricsPort, log, { api, startedAt });
      cleanups.push(() => metricsServer.close());
      metricsUrl = metricsServer.url;
    }
    return { url, store, worker, media, registry, metricsUrl, close };
  } catch (err) {
    await close();
    throw err;
  }
}

async function serveHttp(config: Config, api: Koa.Middleware, log: Logger, metrics: HttpMetrics, routers: readonly Router[] = []): Promise<Server> {
  const app = new Koa({ proxy: false });
  app.use(async (ctx, next) => {
    const started = performance.now();
    await next();
    const ms = performance.now() - started;
    metrics.request(ctx.state['operation'] as string | undefined, ctx.status, ms / 1000);
    // Method, path and status only: never bodies or headers (they hold content and tokens).
    // At debug: a synchronous line per request would cost a sixth of the throughput.
    if (log.isLevelEnabled('debug')) log.debug({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(ms) }, 'request');
  });
  app.use(api);
  const docs = docsRouter();
  const router = new Router();
  router.get('/', (ctx) => ctx.redirect('/docs'));
  app.use(docs.routes()).use(router.routes());
  for (const r of routers) app.use(r.routes());
  const server = createServer(app.callback());
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(listenProblem(err, config.host, config.port, 'PORT') ?? err));
    server.listen(config.port, config.host, () => resolve());
  });
  return server;
}

/**
 * The destination service answers a failed channel lookup in its own words ("channel not found or
 * not visible to the bot", "discord unavailable"): log what Discord said (status and code) first.
 */
function loggedChannels(channels: Channels, log: Logger): Channels {
  return {
    getChannel: async (channelId) => {
      try {
        return await channels.getChannel(channelId);
      } catch (err) {
        log.warn({ channel_id: channelId, err: errorSummary(err) }, 'channel lookup failed at Discord');
        throw err;
      }
    },
  };
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}
