import type { AddressInfo } from 'node:net';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { HeraldModule, Roles } from './modules/contract.js';
import { deliveriesModule, ownMessageLedger } from './modules/deliveries/index.js';
import { MODULES } from './modules/registry.js';
import { defineMetrics, doorbellOf, readinessOf, reportQueues, runJobs, schedulePrune, startModules, type JobRunner } from './modules/runner.js';
import { systemClock, type Clock } from './platform/clock.js';
import { openStore, type Store } from './platform/db/database.js';
import { Events } from './platform/db/events.js';
import { tablesOf } from './platform/db/tables.js';
import { migrateToLatest } from './platform/db/migrate.js';
import { errorSummary, NotFoundError } from './platform/errors.js';
import { createApi } from './platform/http/api.js';
import { HttpMetrics } from './platform/http/http.metrics.js';
import { serveMetrics } from './platform/http/metrics-server.js';
import { probeOperations } from './platform/http/probes.js';
import { closeServer, serveHttp } from './platform/http/server.js';
import { createLogger } from './platform/log.js';
import { createRegistry, type Registry } from './platform/metrics.js';
import type { Database } from './schema.js';
import type { Surfaces } from './transports/plugin.js';
import { configuredPlatforms, startPlatforms } from './transports/start.js';
import { transportsOf, type Transport, type Transports } from './transports/transport.js';
import { loadOperatorPolicy } from './mcp/policy.js';
import { policyCheck, type OriginalOf } from './platform/http/policy.middleware.js';
import { confirmKey } from './platform/policy/confirm.js';
import { NO_POLICY } from './platform/policy/policy.js';

export interface HeraldOptions {
  config: Config;
  clock?: Clock;
  log?: Logger;
  /** What this process does: serve HTTP, dispatch jobs, or both (the default). */
  roles?: Roles;
  /** Sandbox mode: the sandbox's origin, where people open the messages Herald delivered. */
  messageLinkBase?: string;
  /** Sandbox mode: the sandbox's origin, the one private origin the media archive may download from. */
  mediaOrigins?: readonly string[];
}

export interface Herald {
  /** The API's base URL, when serving HTTP. */
  readonly url: string | undefined;
  readonly store: Store<Database>;
  /** The job runner, when this process dispatches. */
  readonly worker: JobRunner | undefined;
  /** The platforms this process speaks. */
  readonly transports: Transports;
  /** What a module gives (its services), e.g. `use(archiveModule).media`. */
  use<G>(module: HeraldModule<G>): G;
  /** Every metric this process exports. */
  readonly registry: Registry;
  /** Base URL of `/metrics` and the status page, unless HERALD_METRICS_PORT is off. */
  readonly metricsUrl: string | undefined;
  /** Stop serving, stop claiming, finish or release in-flight jobs, close the store. */
  close(): Promise<void>;
}

/**
 * Wiring only: open the store, start the configured platforms (src/transports/registry.ts) and the
 * modules (src/modules/registry.ts), then run what the modules declare: one job runner, one prune
 * schedule, one readiness answer, one HTTP API.
 */
export async function startHerald(options: HeraldOptions): Promise<Herald> {
  const { config } = options;
  const startedAt = new Date();
  const clock = options.clock ?? systemClock;
  const log = options.log ?? createLogger(config.logLevel);
  const roles = options.roles ?? { http: true, dispatcher: true };
  const registry = createRegistry();
  const metrics = await defineMetrics(MODULES, registry);
  const cleanups: (() => Promise<void>)[] = [];
  const close = async (): Promise<void> => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch((err: unknown) => log.error({ err: errorSummary(err) }, 'shutdown step failed'));
  };
  const platforms = configuredPlatforms(config.platforms, config.transport);
  // What the operator must fix in a platform's settings stops start-up before the store opens.
  for (const p of platforms) await p.check?.(config.platforms[p.name], log);
  // The operator's policy file: every problem listed before anything starts.
  const policy = await loadOperatorPolicy(config);
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

    const ledger = ownMessageLedger(tablesOf(store.db));
    const shared = { store: store as Store, clock, log, registry, serving: roles.http, dispatching: roles.dispatcher, ownMessage: ledger.record, ledger, singletonTtlMs: config.singletonTtlMs };
    const { running, singletons } = await startPlatforms(platforms, config.platforms, shared, cleanups);
    const [home, ...others] = running.map((r) => r.facets);
    const transports = transportsOf(home as Transport, ...others); // config.ts made sure HERALD_TRANSPORT is configured
    const doorbell = doorbellOf(store);
    const events = new Events(store as Store);
    cleanups.push(() => events.close());
    const site = { messageLinkBase: options.messageLinkBase, mediaOrigins: options.mediaOrigins ?? [] };
    const modules = await startModules(MODULES, metrics, { config, store: store as Store, db: store.db as Kysely<unknown>, clock, log, registry, transports, doorbell, events, roles, site, policy });
    cleanups.push(() => modules.close());
    const parts = modules.parts;
    const jobs = parts.flatMap((p) => p.jobs ?? []);
    const queueAges = reportQueues(jobs, registry, clock);
    const worker = roles.dispatcher ? await runJobs(jobs, { config, store, clock, log, doorbell, registry }) : undefined;
    if (worker !== undefined) cleanups.push(() => worker.stop());

    // The platforms' own surfaces (Discord's gateway: slash commands, inbound messages) once the modules are up.
    const surfaces: Partial<Surfaces> = Object.assign({}, ...parts.map((p) => p.surfaces ?? {}));
    if (roles.http) for (const r of running) await r.serve?.(surfaces);

    let url: string | undefined;
    let api: { host: string; port: number; pages: { title: string; path: string }[] } | undefined;
    if (roles.http) {
      const stopPruning = schedulePrune(parts.flatMap((p) => p.prune ?? []), clock, log, registry);
      cleanups.push(async () => stopPruning());
      const readiness = readinessOf(store, worker, [...running.map((r) => () => r.readiness()), ...parts.map((p) => p.readiness ?? {})]);
      const httpMetrics = new HttpMetrics(registry);
      const middleware = await createApi({
        bridgeToken: config.bridgeToken,
        adminToken: config.adminToken,
        log,
        onAuthFailure: (area, throttled) => httpMetrics.authFailure(area, throttled),
        // Held on every bridge call, with or without a policy file (an OAuth client's upload cap has a default).
        policy: policyCheck({
          policy: policy ?? NO_POLICY,
          db: store.db as Kysely<unknown>,
          registry,
          confirmKey: confirmKey(config.bridgeToken ?? ''),
          defaults: { chat: config.chatTransport },
          originalOf: originalDelivery(modules.use(deliveriesModule).deliveries),
        }),
        operations: [...parts.flatMap((p) => p.operations ?? []), probeOperations(readiness, () => singletons.states(), queueAges)],
      });
      const routes = parts.flatMap((p) => p.routes ?? []);
      const server = await serveHttp(config, middleware, log, httpMetrics, routes.map((r) => r.router));
      // Stop accepting requests (cleanups run in reverse), after ending what would hold the server open.
      cleanups.push(() => closeServer(server));
      cleanups.push(async () => routes.forEach((r) => r.close?.()));
      const address = server.address() as AddressInfo;
      url = `http://${config.host}:${address.port}`;
      // The pages an operator opens, linked from the status page on the metrics port.
      api = { host: config.host, port: address.port, pages: [{ title: 'API docs', path: '/docs' }, ...parts.flatMap((p) => p.pages ?? [])] };
    }
    let metricsUrl: string | undefined;
    if (config.metricsPort !== undefined) {
      const metricsServer = await serveMetrics(registry, config.metricsHost, config.metricsPort, log, { api, startedAt });
      cleanups.push(() => metricsServer.close());
      metricsUrl = metricsServer.url;
    }
    return { url, store, worker, transports, use: modules.use, registry, metricsUrl, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Where an earlier post or DM went, by its request_id: its kind and target as it was accepted (the policy's `message_ref`). */
function originalDelivery(deliveries: { detail(requestId: string): Promise<{ kind: string; target: unknown }> }): OriginalOf {
  return async (ref) => {
    // Only a request_id can name one (asked before the input is checked: the text may be anything).
    if (!/^[0-9a-f]{64}$/.test(ref)) return undefined;
    try {
      const original = await deliveries.detail(ref);
      return { body: { kind: original.kind, target: original.target } };
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  };
}
