import type { Kysely } from 'kysely';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import type { CommandRouter } from '../../src/modules/commands/command.js';
import { commandsModule } from '../../src/modules/commands/index.js';
import { deliveriesModule, type DeliveryService } from '../../src/modules/deliveries/index.js';
import type { Delivery } from '../../src/modules/deliveries/delivery.js';
import { destinationsModule, type DestinationService } from '../../src/modules/destinations/index.js';
import { identityModule, type IdentityService } from '../../src/modules/identity/index.js';
import { MODULES } from '../../src/modules/modules.js';
import { defineMetrics, doorbellOf, runJobs, startModules, type JobRunner } from '../../src/modules/runner.js';
import type { Clock } from '../../src/infra/clock.js';
import { openStore, type Store } from '../../src/infra/db/database.js';
import { Events } from '../../src/infra/db/events.js';
import { migrateToLatest } from '../../src/infra/db/migrate.js';
import { createRegistry } from '../../src/infra/metrics.js';
import type { Database } from '../../src/schema.js';
import { MemoryPlatform } from '../../src/platforms/memory/memory-platform.js';
import { speakingAs, type Invokers, type Platform } from '../../src/platforms/platform.js';
import { waitFor } from './wait.js';

export const GUILD = '234567890123456789';
export const CHANNEL = '345678901234567890';
export const USER = '123456789012345678';

/** What the command router's preconditions see in tests: commands refer to identity and destinations. */
export type CommandDeps = { identity: IdentityService; destinations: DestinationService };

/**
 * Herald's modules (src/modules/modules.ts, started as src/app.ts starts them) and its job runner
 * on embedded PGlite and the in-memory transport: no HTTP, no sandbox, no database server. The
 * fast layer for module logic.
 */
export interface Services {
  store: Store<Database>;
  memory: MemoryPlatform;
  deliveries: DeliveryService;
  destinations: DestinationService;
  identity: IdentityService;
  worker: JobRunner;
  commands: CommandRouter<undefined>;
  /** Channels where Herald may not post (the bot_can_post precondition's answer). */
  botBlockedIn: Set<string>;
  /** Accept (as `identity`, default the default one), then wait for a terminal (or the given) state. */
  deliver(d: Delivery, until?: string, identity?: string): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

export interface ServiceOptions {
  /** Another transport than the memory one (e.g. one without some facets). */
  transport?: (memory: MemoryPlatform) => Platform;
  /** The transport's other identities (src/infra/policy/identity.ts), by name. */
  identities?: Record<string, Platform>;
  nonceWindowMs?: number;
  maxAttempts?: number;
  clock?: Clock;
}

export async function startServices(options: ServiceOptions = {}): Promise<Services> {
  const dir = await mkdtemp(path.join(tmpdir(), 'herald-svc-'));
  const store = await openStore<Database>({ databaseUrl: undefined, dataDir: dir });
  await migrateToLatest(store.db);
  const config = loadConfig({
    HERALD_TRANSPORT: 'memory',
    HERALD_DATA_DIR: dir,
    HERALD_NONCE_WINDOW_MS: String(options.nonceWindowMs ?? 120_000),
    HERALD_MAX_ATTEMPTS: String(options.maxAttempts ?? 4),
    HERALD_RETRY_BASE_MS: '10',
    HERALD_LEASE_MS: '10000',
    HERALD_POLL_MS: '20',
    HERALD_DISPATCH_CONCURRENCY: '8',
    HERALD_SHUTDOWN_GRACE_MS: '1000',
  });
  const clock = options.clock ?? { now: () => new Date() };
  const memory = new MemoryPlatform({ now: () => clock.now() });
  memory.addUser(USER, 'Ada').addChannel(CHANNEL, { guildId: GUILD, name: 'alerts', members: [USER] });
  const botBlockedIn = new Set<string>();
  // Herald's own permissions, as a platform would compute them: blocked where a test says so.
  const invokers: Invokers = { resolve: async () => ({ notFound: 'guild' }), message: async () => undefined, botCanPost: async (_guildId, channelId) => !botBlockedIn.has(channelId) };
  const chosen = options.transport?.(memory) ?? memory;
  // Destinations look channels up on the memory platform, whatever facets the test's transport keeps.
  const transport: Platform = Object.assign(Object.create(chosen) as Platform, { invokers, channels: memory.channels });
  const log = pino({ level: 'silent' });
  const base = { config, store: store as Store, db: store.db as Kysely<unknown>, clock, log, registry: createRegistry(), transports: speakingAs(transport, [], new Map([[transport.name, new Map(Object.entries(options.identities ?? {}))]])), doorbell: doorbellOf(store), events: new Events(store as Store) };
  const modules = await startModules(MODULES, await defineMetrics(MODULES, base.registry), { ...base, roles: { http: false, dispatcher: true }, site: { messageLinkBase: undefined, mediaOrigins: [] } });
  const worker = await runJobs(modules.parts.flatMap((p) => p.jobs ?? []), base);
  const { deliveries } = modules.use(deliveriesModule);
  const terminal = new Set(['delivered', 'failed', 'unknown']);
  return {
    store,
    memory,
    deliveries,
    destinations: modules.use(destinationsModule).destinations,
    identity: modules.use(identityModule).identity,
    worker,
    botBlockedIn,
    commands: modules.use(commandsModule).router,
    async deliver(d, until, identity) {
      await deliveries.accept(d, identity);
      worker.wake();
      return waitFor(async () => {
        const s = (await deliveries.get(d.request_id, identity)) as unknown as Record<string, unknown>;
        return (until === undefined ? terminal.has(String(s['state'])) : s['state'] === until) ? s : undefined;
      }, `${d.request_id.slice(0, 8)}… to settle`, 20_000);
    },
    async close() {
      await worker.stop();
      await modules.close();
      await base.events.close();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
