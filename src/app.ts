import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { capabilities, platformIdentities } from './capabilities.js';
import type { HeraldModule, Roles } from './modules/contract.js';
import { ownMessageLedger } from './modules/deliveries/index.js';
import { contractOf, serveApi } from './modules/http-api.js';
import { MODULES } from './modules/modules.js';
import { checkNeeds, declaredMigrations, defineMetrics, doorbellOf, readinessOf, reportQueues, runJobs, schedulePrune, startModules, type JobRunner } from './modules/runner.js';
import { systemClock, type Clock } from './infra/clock.js';
import { openStore, type Store } from './infra/db/database.js';
import { Events } from './infra/db/events.js';
import { tablesOf } from './infra/db/tables.js';
import { migrateToLatest } from './infra/db/migrate.js';
import { errorSummary } from './infra/errors.js';
import { armedFaultPoints } from './infra/faults/fault-points.js';
import { serveMetrics } from './infra/http/metrics-server.js';
import { createLogger } from './infra/log.js';
import { createRegistry, type Registry } from './infra/metrics.js';
import type { Database } from './schema.js';
import { identityChecks, tokenTroubles, type PlatformPlugin, type Surfaces } from './platforms/plugin.js';
import { platformAdminGate } from './infra/http/auth.js';
import { PLATFORMS } from './platforms/platforms.js';
import { configuredPlatforms, startPlatforms } from './platforms/start.js';
import { speakingAs, type Platform, type Platforms } from './platforms/platform.js';
import { loadOperatorPolicy } from './mcp/policy.js';

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
  /** The modules to start (default: src/modules/modules.ts); `config` must be loaded with the same list. */
  modules?: readonly HeraldModule[];
  /** Every platform Herald can speak: the registry (src/platforms/platforms.ts), unless a test adds its own (with `loadConfig`'s). */
  platforms?: readonly PlatformPlugin[];
}

export interface Herald {
  /** The API's base URL, when serving HTTP. */
  readonly url: string | undefined;
  readonly store: Store<Database>;
  /** The job runner, when this process dispatches. */
  readonly worker: JobRunner | undefined;
  /** The platforms this process speaks. */
  readonly transports: Platforms;
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
 * Wiring only: open the store, start the configured platforms (src/platforms/platforms.ts) and the
 * modules (src/modules/modules.ts), then run what the modules declare: one job runner, one prune
 * schedule, one readiness answer, one HTTP API.
 */
export async function startHerald(options: HeraldOptions): Promise<Herald> {
  const { config } = options;
  const startedAt = new Date();
  const clock = options.clock ?? systemClock;
  const log = options.log ?? createLogger(config.logLevel);
  const roles = options.roles ?? { http: true, dispatcher: true };
  // Only the chaos campaign sets it: a process started with it may stop itself (SIGSTOP) mid-job, and waits there for good.
  const faultPoints = armedFaultPoints();
  if (faultPoints.length > 0) log.warn({ fault_points: faultPoints }, 'HERALD_FAULT_POINTS is set: this process stops itself (SIGSTOP) at these points, for the chaos campaign to continue it; never set it in a deployment');
  const list = options.modules ?? MODULES;
  // What the modules declare is checked before anything starts: their needs, their contracts, their migrations' names.
  checkNeeds(list);
  const contract = contractOf(list);
  const registry = createRegistry();
  const metrics = await defineMetrics(list, registry);
  const cleanups: (() => Promise<void>)[] = [];
  const close = async (): Promise<void> => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch((err: unknown) => log.error({ err: errorSummary(err) }, 'shutdown step failed'));
  };
  const platforms = configuredPlatforms(config.platforms, config.transport, options.platforms);
  // Every platform's tables exist whether or not this process speaks it (other processes may).
  const declared = declaredMigrations([...(options.platforms ?? PLATFORMS), ...list]);
  // What the operator must fix in a platform's settings stops start-up before the store opens.
  // A sandbox's token is one Herald made up for it: nothing to check, nothing to tell the operator.
  for (const p of platforms) if (!config.sandboxed.includes(p.name)) await p.check?.(config.platforms[p.name], log);
  // The operator's policy file: every problem listed before anything starts.
  const policy = await loadOperatorPolicy(config, [...new Set(platforms.flatMap((p) => p.identities?.(config.platforms[p.name]) ?? []))]);
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
    await migrateToLatest(store.db, { startupTimeoutMs: config.dbStartupTimeoutMs, databaseUrl: config.databaseUrl, log, declared });
    log.info({ store: store.kind }, 'store ready');

    const ledger = ownMessageLedger(tablesOf(store.db));
    // Counted with the API's own failed logins (herald_http_auth_failures_total, area admin), once that counter is registered.
    const adminGate = platformAdminGate(config.adminToken, (throttled) =>
      (registry.getSingleMetric('herald_http_auth_failures_total') as { inc?(labels: Record<string, string>): void } | undefined)?.inc?.({ area: 'admin', reason: throttled ? 'throttled' : 'unauthorized' }),
    );
    const shared = { store: store as Store, clock, log, registry, serving: roles.http, dispatching: roles.dispatcher, ownMessage: ledger.record, ledger, adminGate, singletonTtlMs: config.singletonTtlMs, singletonDownMs: config.singletonDownMs };
    const { running, singletons } = await startPlatforms(platforms, config.platforms, shared, cleanups);
    const [home, ...others] = running.map((r) => r.facets);
    // config.ts made sure HERALD_TRANSPORT is configured; each platform as each of its identities beside.
    const transports = speakingAs(home as Platform, others, new Map(running.map((r) => [r.facets.name, r.identities ?? new Map()])));
    const doorbell = doorbellOf(store);
    const events = new Events(store as Store);
    cleanups.push(() => events.close());
    const site = { messageLinkBase: options.messageLinkBase, mediaOrigins: options.mediaOrigins ?? [] };
    const modules = await startModules(list, metrics, { config, store: store as Store, db: store.db as Kysely<unknown>, clock, log, registry, transports, doorbell, events, roles, site, policy });
    cleanups.push(() => modules.close());
    const parts = modules.parts;
    const jobs = parts.flatMap((p) => p.jobs ?? []);
    const queueAges = reportQueues(jobs, registry, clock);
    const worker = roles.dispatcher ? await runJobs(jobs, { config, store, clock, log, doorbell, registry }) : undefined;
    if (worker !== undefined) cleanups.push(() => worker.stop());

    // The platforms' own surfaces (Discord's gateway: slash commands, inbound messages) once the modules are up.
    const surfaces: Partial<Surfaces> = Object.assign({}, ...parts.map((p) => p.surfaces ?? {}));
    if (roles.http) for (const r of running) await r.serve?.(surfaces);

    let serving: Awaited<ReturnType<typeof serveApi>> | undefined;
    if (roles.http) {
      const stopPruning = schedulePrune(parts.flatMap((p) => p.prune ?? []), clock, log, registry);
      cleanups.push(async () => stopPruning());
      const readiness = readinessOf(store, worker, [...running.map((r) => () => r.readiness()), ...parts.map((p) => p.readiness ?? {})]);
      serving = await serveApi({ config, log, registry, store: store as Store, policy, contract, modules, probes: [readiness, () => singletons.states(), queueAges, () => identityChecks(running)], platformRoutes: running.flatMap((r) => r.routes ?? []) });
      cleanups.push(() => (serving as { close(): Promise<void> }).close());
    }
    let metricsUrl: string | undefined;
    if (config.metricsPort !== undefined) {
      const metricsServer = await serveMetrics(registry, config.metricsHost, config.metricsPort, log, {
        api: serving?.api,
        startedAt,
        capabilities: capabilities(config),
        platforms: platformIdentities(transports, config, (platform, as) => tokenTroubles(running, platform, as)),
      });
      cleanups.push(() => metricsServer.close());
      metricsUrl = metricsServer.url;
    }
    return { url: serving?.url, store, worker, transports, use: modules.use, registry, metricsUrl, close };
  } catch (err) {
    await close();
    throw err;
  }
}
