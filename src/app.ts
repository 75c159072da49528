import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import Koa from 'koa';
import { sql } from 'kysely';
import type { Logger } from 'pino';
import type { ChatHost } from './chat/chat-host.js';
import { systemClock, type Clock } from './platform/clock.js';
import type { Config } from './config.js';
import { openStore, type Store } from './platform/db/database.js';
import { migrateToLatest } from './platform/db/migrate.js';
import { DeliveryService } from './modules/deliveries/delivery.service.js';
import { recordSentMessage } from './modules/deliveries/delivery.repository.js';
import { Dispatcher } from './modules/deliveries/delivery.jobs.js';
import { DestinationService } from './modules/destinations/destination.service.js';
import { DiscordHost } from './transports/discord/discord-transport.js';
import { connectGateway, type GatewayConnection } from './transports/discord/gateway-client.js';
import { IdentityService } from './modules/identity/identity.service.js';
import { createApi } from './platform/http/api.js';
import { docsRouter } from './platform/http/docs.js';
import { createLogger } from './platform/log.js';
import { Metrics } from './platform/metrics.js';
import { DiscordSandbox } from './sandbox/sandbox.js';

export interface HeraldOptions {
  config: Config;
  clock?: Clock;
  log?: Logger;
  /** What this process does: serve HTTP, dispatch deliveries, or both (the default). */
  roles?: { http: boolean; dispatcher: boolean };
}

export interface Herald {
  /** The API's base URL, when serving HTTP. */
  readonly url: string | undefined;
  /** The built-in Discord sandbox, in sandbox mode. */
  readonly sandbox: DiscordSandbox | undefined;
  readonly store: Store;
  readonly dispatcher: Dispatcher | undefined;
  readonly metrics: Metrics;
  /** Stop serving, stop claiming, finish or release in-flight deliveries, close the store. */
  close(): Promise<void>;
}

export async function startHerald(options: HeraldOptions): Promise<Herald> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const log = options.log ?? createLogger(config.logLevel);
  const roles = options.roles ?? { http: true, dispatcher: true };
  const metrics = new Metrics();
  const cleanups: (() => Promise<void>)[] = [];
  const close = async (): Promise<void> => {
    for (const cleanup of cleanups.splice(0).reverse()) {
      await cleanup().catch((err: unknown) => log.error({ err: String(err) }, 'shutdown step failed'));
    }
  };

  try {
    const store = await openStore({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      onConnectionError: (err) => log.warn({ err: err.message }, 'database connection lost; it is replaced on next use'),
      log,
    });
    cleanups.push(() => store.close());
    // PostgreSQL may still be starting (or recovering) when Herald starts: wait for it, bounded.
    await migrateToLatest(store.db, { startupTimeoutMs: config.dbStartupTimeoutMs, databaseUrl: config.databaseUrl, log });
    log.info({ store: store.kind }, 'store ready');

    let sandbox: DiscordSandbox | undefined;
    let token = config.discordToken;
    let apiUrl = config.discordApiUrl;
    if (token === undefined) {
      sandbox = await new DiscordSandbox().start(config.sandboxPort, config.host);
      cleanups.push(() => sandbox?.close() ?? Promise.resolve());
      token = sandbox.botToken;
      apiUrl = sandbox.apiUrl;
    }
    const host: ChatHost = new DiscordHost({ token, apiUrl, timeoutMs: config.discordTimeoutMs });

    let dispatcher: Dispatcher | undefined;
    if (roles.dispatcher) {
      dispatcher = new Dispatcher(store, host, clock, log, metrics, {
        leaseMs: config.leaseMs,
        pollMs: config.pollMs,
        nonceWindowMs: config.nonceWindowMs,
        maxAttempts: config.maxAttempts,
        retryBaseMs: config.retryBaseMs,
        concurrency: config.dispatchConcurrency,
        shutdownGraceMs: config.shutdownGraceMs,
      });
      await dispatcher.start();
      const d = dispatcher;
      cleanups.push(() => d.stop());
    }

    const capabilities = {
      post: host.capabilities.post,
      dm: host.capabilities.dm && !config.disabledKinds.includes('dm'),
      edit: host.capabilities.edit && !config.disabledKinds.includes('edit'),
    };
    const services: Services = {
      deliveries: new DeliveryService(store.db, clock, capabilities),
      destinations: new DestinationService(store.db, host, clock),
      identity: new IdentityService(store.db, clock),
      capabilities,
    };

    let gateway: GatewayConnection | undefined;
    if (roles.http && config.gateway) {
      try {
        log.info('connecting to the Discord gateway');
        gateway = await connectGateway({
          token,
          apiUrl,
          deps: services,
          log,
          onOwnMessage: (m) => recordSentMessage(store.db, m.nonce, m.channelId, m.messageId, m.createdAt),
        });
        const g = gateway;
        cleanups.push(() => g.close());
      } catch (err) {
        // Deliveries do not need the gateway: keep serving, and say so in /readyz.
        log.error({ err: err instanceof Error ? err.message : String(err) }, 'gateway unavailable; slash commands will not be answered');
      }
    }

    let url: string | undefined;
    if (roles.http) {
      const server = await serveHttp(config, store, services, log, metrics, dispatcher, config.gateway ? () => gateway?.ready ?? false : undefined);
      // Stop accepting requests first (cleanups run in reverse).
      cleanups.push(() => closeServer(server));
      const address = server.address() as AddressInfo;
      url = `http://${config.host}:${address.port}`;
    }
    return { url, sandbox, store, dispatcher, metrics, close };
  } catch (err) {
    await close();
    throw err;
  }
}

interface Services {
  deliveries: DeliveryService;
  destinations: DestinationService;
  identity: IdentityService;
  capabilities: { post: boolean; dm: boolean; edit: boolean };
}

async function serveHttp(
  config: Config,
  store: Store,
  services: Services,
  log: Logger,
  metrics: Metrics,
  dispatcher: Dispatcher | undefined,
  gatewayReady: (() => boolean) | undefined,
): Promise<Server> {
  const middleware = await createApi({
    bridgeToken: config.bridgeToken,
    adminToken: config.adminToken,
    ...services,
    log,
    readiness: async () => {
      const checks: Record<string, string> = {};
      try {
        await sql`select 1`.execute(store.db);
        checks['database'] = 'ok';
      } catch {
        checks['database'] = 'unavailable';
      }
      if (dispatcher !== undefined) checks['dispatcher'] = dispatcher.running ? 'ok' : 'stopped';
      // The dispatcher's LISTEN session: while it reconnects, new deliveries wait for polling.
      if (dispatcher !== undefined) checks['listen'] = store.listening() ? 'ok' : 'unavailable';
      if (gatewayReady !== undefined) checks['gateway'] = gatewayReady() ? 'ok' : 'unavailable';
      return checks;
    },
  });
  const app = new Koa({ proxy: false });
  app.use(async (ctx, next) => {
    const started = performance.now();
    await next();
    // Method, path and status only: never bodies or headers (they hold content and tokens).
    log.info({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - started) }, 'request');
  });
  app.use(middleware);
  const docs = docsRouter();
  const router = new Router();
  router.get('/', (ctx) => ctx.redirect('/docs'));
  router.get('/metrics', (ctx) => {
    ctx.type = 'text/plain; version=0.0.4';
    ctx.body = metrics.render();
  });
  app.use(docs.routes()).use(router.routes());
  const server = createServer(app.callback());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  return server;
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}
