import pino from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { chatRequestId, chatSendKind } from '../src/modules/chat/chat.kind.js';
import { ChatService } from '../src/modules/chat/chat.service.js';
import { DeliveryJobs, deliveryQueue, HELD_ELSEWHERE_FREE_MS, type DeliveryJob } from '../src/modules/deliveries/delivery.jobs.js';
import { DeliveryMetrics } from '../src/modules/deliveries/delivery.metrics.js';
import { findDelivery } from '../src/modules/deliveries/delivery.repository.js';
import { DeliveryService } from '../src/modules/deliveries/delivery.service.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';
import { OutboxWorker } from '../src/outbox/worker.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { MemoryPlatform } from '../src/platforms/memory/memory-platform.js';
import { TransportError, platformsOf } from '../src/platforms/platform.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { waitFor } from './support/wait.js';

/**
 * A job whose connection another replica holds is put back without spending an attempt, but not
 * for ever: past a bound it is an ordinary transient failure, and the one failure rule ends it.
 */
describe('a delivery left to the replica holding its connection', () => {
  let fixture: MigratedStore;
  let worker: OutboxWorker<DeliveryJob>;
  let chat: ChatService;
  let memory: MemoryPlatform;
  let offsetMs = 0;
  const clock = { now: () => new Date(Date.now() + offsetMs) };

  beforeAll(async () => {
    fixture = await migratedStore();
    const db = tablesOf<DeliveriesDb>(fixture.store.db);
    memory = new MemoryPlatform();
    memory.addChannel('c1', { name: 'general', members: [] });
    const transports = platformsOf(memory);
    const log = pino({ level: 'silent' });
    const ports = { resolveDestination: async () => undefined, isRegistered: async () => false, registeredOn: async () => null };
    const jobs = new DeliveryJobs(db, transports, clock, log, new DeliveryMetrics(new Registry()), { nonceWindowMs: 60_000, maxAttempts: 3, retryBaseMs: 10, leaseMs: 10_000 }, ports);
    jobs.declare(chatSendKind(transports));
    worker = new OutboxWorker(deliveryQueue(db), clock, log, { leaseMs: 10_000, pollMs: 20, concurrency: 2, shutdownGraceMs: 1_000 });
    for (const k of jobs.kinds()) worker.register(k);
    worker.start();
    const deliveries = new DeliveryService(db, clock, { post: true, dm: true, edit: true }, { announce: () => worker.wake() });
    chat = new ChatService(deliveries, transports, 'memory', clock);
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await fixture?.close();
  });

  it('bounces free while young, then spends attempts and fails: never bounces for good', async () => {
    // This process never holds the connection the send needs.
    const send = vi.spyOn(memory.chat, 'send').mockRejectedValue(new TransportError({ kind: 'transient', heldElsewhere: true, detail: 'the connection is held by another replica' }));
    const { id } = await chat.send({ channel: 'general', text: 'hello', sender: 'ada' });
    await waitFor(() => send.mock.calls.length >= 5, 'several bounces');
    const row = await findDelivery(tablesOf<DeliveriesDb>(fixture.store.db), chatRequestId(id));
    expect(row).toMatchObject({ status: expect.stringMatching(/^(pending|in_flight)$/), attempts: expect.any(Number) });
    expect(row!.attempts).toBeLessThanOrEqual(1);
    // Later than the bound after it was stored: each bounce now spends an attempt, and then it ends.
    offsetMs = HELD_ELSEWHERE_FREE_MS + 1_000;
    const done = await waitFor(async () => {
      const s = await chat.get(id);
      return s.state !== 'pending' ? s : undefined;
    }, 'the send to end', 10_000);
    expect(done).toMatchObject({ state: 'failed' });
    expect(done.reason).toMatch(/attempts exhausted.*held by another replica/);
    send.mockRestore();
  }, 30_000);
});
