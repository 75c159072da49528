import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { commandRouter } from '../../src/modules/commands/registry.js';
import { DeliveryJobs, deliveryQueue, type DeliveryJob } from '../../src/modules/deliveries/delivery.jobs.js';
import { declareSendKinds, deliveryPorts } from '../../src/send-wiring.js';
import type { Delivery } from '../../src/modules/deliveries/delivery.js';
import { DeliveryService, type KindSupport } from '../../src/modules/deliveries/delivery.service.js';
import { DestinationService } from '../../src/modules/destinations/destination.service.js';
import { IdentityService } from '../../src/modules/identity/identity.service.js';
import { OutboxWorker } from '../../src/outbox/worker.js';
import type { Clock } from '../../src/platform/clock.js';
import { openStore, type Store } from '../../src/platform/db/database.js';
import { migrateToLatest } from '../../src/platform/db/migrate.js';
import { DeliveryMetrics } from '../../src/modules/deliveries/delivery.metrics.js';
import { createRegistry } from '../../src/platform/metrics.js';
import type { Database } from '../../src/schema.js';
import { MemoryTransport } from '../../src/transports/memory/memory-transport.js';
import { capabilitiesOf, transportsOf, type Transport } from '../../src/transports/transport.js';
import { waitFor } from './wait.js';

export const GUILD = '234567890123456789';
export const CHANNEL = '345678901234567890';
export const USER = '123456789012345678';

/**
 * Herald's services and outbox worker on embedded PGlite and the in-memory transport: no HTTP, no
 * sandbox, no database server. The fast layer for module logic.
 */
export interface Services {
  store: Store<Database>;
  memory: MemoryTransport;
  deliveries: DeliveryService;
  destinations: DestinationService;
  identity: IdentityService;
  worker: OutboxWorker<DeliveryJob>;
  commands: ReturnType<typeof commandRouter>;
  /** Channels where Herald may not post (the bot_can_post precondition's answer). */
  botBlockedIn: Set<string>;
  /** Accept, then wait for a terminal (or the given) state. */
  deliver(d: Delivery, until?: string): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

export interface ServiceOptions {
  /** Another transport than the memory one (e.g. one without some facets). */
  transport?: (memory: MemoryTransport) => Transport;
  nonceWindowMs?: number;
  maxAttempts?: number;
  clock?: Clock;
}

export async function startServices(options: ServiceOptions = {}): Promise<Services> {
  const dir = await mkdtemp(path.join(tmpdir(), 'herald-svc-'));
  const store = await openStore<Database>({ databaseUrl: undefined, dataDir: dir });
  await migrateToLatest(store.db);
  const clock = options.clock ?? { now: () => new Date() };
  const memory = new MemoryTransport({ now: () => clock.now() });
  memory.addUser(USER, 'Ada').addChannel(CHANNEL, { guildId: GUILD, name: 'alerts', members: [USER] });
  const transport = options.transport?.(memory) ?? memory;
  const can = capabilitiesOf(transport);
  const support: KindSupport = { post: can.send, dm: can.dm, edit: can.edit };
  const log = pino({ level: 'silent' });
  const deliveries = new DeliveryService(store.db, clock, support);
  const destinations = new DestinationService(store.db, { name: transport.name, channels: memory.channels }, clock);
  const identity = new IdentityService(store.db, clock);
  const jobs = new DeliveryJobs(store.db, transportsOf(transport), clock, log, new DeliveryMetrics(createRegistry()), {
    nonceWindowMs: options.nonceWindowMs ?? 120_000,
    maxAttempts: options.maxAttempts ?? 4,
    retryBaseMs: 10,
    leaseMs: 10_000,
  }, deliveryPorts(store.db));
  declareSendKinds(jobs);
  const botBlockedIn = new Set<string>();
  const worker = new OutboxWorker(deliveryQueue(store.db), clock, log, { leaseMs: 10_000, pollMs: 20, concurrency: 8, shutdownGraceMs: 1_000 });
  for (const kind of jobs.kinds()) worker.register(kind);
  worker.start();
  const terminal = new Set(['delivered', 'failed', 'unknown']);
  return {
    store,
    memory,
    deliveries,
    destinations,
    identity,
    worker,
    botBlockedIn,
    commands: commandRouter({ identity, destinations }, async (_guildId, channelId) => !botBlockedIn.has(channelId)),
    async deliver(d, until) {
      await deliveries.accept(d);
      worker.wake();
      return waitFor(async () => {
        const s = (await deliveries.get(d.request_id)) as unknown as Record<string, unknown>;
        return (until === undefined ? terminal.has(String(s['state'])) : s['state'] === until) ? s : undefined;
      }, `${d.request_id.slice(0, 8)}… to settle`, 20_000);
    },
    async close() {
      await worker.stop();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
