import pino from 'pino';
import { sql } from 'kysely';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { chatSendKind } from '../src/modules/chat/chat.kind.js';
import { ChatService } from '../src/modules/chat/chat.service.js';
import { DeliveryJobs, deliveryQueue, type DeliveryJob } from '../src/modules/deliveries/delivery.jobs.js';
import { DeliveryMetrics } from '../src/modules/deliveries/delivery.metrics.js';
import { DeliveryService } from '../src/modules/deliveries/delivery.service.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';
import { WorkerMetrics } from '../src/outbox/outbox.metrics.js';
import { OutboxWorker } from '../src/outbox/worker.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { MemoryPlatform } from '../src/platforms/memory/memory-platform.js';
import { platformsOf, type Chat, type Platform } from '../src/platforms/platform.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { waitFor } from './support/wait.js';

/**
 * No row can block the queue. Rows no accept would let in (the input gate refuses them now, but a
 * store written by an older Herald, a restore or a hand-made row may hold them) are inserted into
 * the deliveries table directly: json whose text holds a lone surrogate's or U+0000's escape (a
 * chat channel `#a\ud800` once made the claim's lane expression fail on every tick, so every
 * delivery stayed `pending` for good), a target that is not the object its kind needs, a
 * `message_ids` that is not JSON. Deliveries accepted after them still flow, and each poison row
 * ends, set aside with its reason, instead of being retried in front of the others.
 */
describe('poison rows in the deliveries table', () => {
  let fixture: MigratedStore;
  let worker: OutboxWorker<DeliveryJob> | undefined;
  const db = () => tablesOf<DeliveriesDb>(fixture.store.db);

  beforeAll(async () => {
    fixture = await migratedStore();
  }, 60_000);
  afterAll(async () => {
    await fixture?.close();
  });
  beforeEach(async () => {
    await sql`delete from deliveries`.execute(fixture.store.db);
  });
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
  });

  /** A row as no accept would write it: `target` and `body` are stored as the json text given. */
  async function poison(id: string, kind: string, target: string, body: string, extra: Record<string, unknown> = {}): Promise<void> {
    const at = new Date(Date.now() - 60_000);
    await sql`insert into deliveries (request_id, kind, target, body, payload_hash, status, created_at, next_attempt_at, message_ids)
      values (${id}, ${kind}, ${target}::json, ${body}::json, 'h', 'pending', ${at}, ${at}, ${(extra['message_ids'] as string | undefined) ?? null})`.execute(fixture.store.db);
  }

  it('the claim never fails on a row: sends accepted after the poison rows are delivered, and each poison row ends', async () => {
    const memory = new MemoryPlatform();
    memory.addUser('u1', 'Ada').addChannel('c1', { name: 'general', members: ['u1'] });
    // A platform that paces each sender's lines (as IRC): the claim computes a lane for its chat rows.
    const transport = Object.create(memory, { chat: { value: { ...memory.chat, pacedBySender: true } satisfies Chat } }) as Platform;
    const transports = platformsOf(transport);
    const log = pino({ level: 'silent' });
    const clock = { now: () => new Date() };
    const registry = new Registry();
    const jobs = new DeliveryJobs(db(), transports, clock, log, new DeliveryMetrics(registry), { nonceWindowMs: 60_000, maxAttempts: 3, retryBaseMs: 10, leaseMs: 30_000 }, { resolveDestination: async () => undefined, isRegistered: async () => false, registeredOn: async () => null });
    jobs.declare(chatSendKind(transports));
    worker = new OutboxWorker(deliveryQueue(db(), undefined, undefined, { pacedBySender: ['memory'], byIdentity: false }), clock, log, { leaseMs: 30_000, pollMs: 20, concurrency: 4, shutdownGraceMs: 2_000, metrics: new WorkerMetrics(registry) });
    for (const k of jobs.kinds()) worker.register(k);
    const deliveries = new DeliveryService(db(), clock, { post: true, dm: true, edit: true }, { announce: () => worker?.wake() });
    const chat = new ChatService(deliveries, transports, 'memory', clock);

    const poisons = {
      // The review's row: a lone surrogate's escape in a chat target (the lane expression read it).
      surrogate: ['chat', '{"transport":"memory","channel":"#a\\ud800","sender":"ada"}', '{"content":"x"}'],
      nul: ['chat', '{"transport":"memory","channel":"general","sender":"ada\\u0000"}', '{"content":"x"}'],
      nulBody: ['post', '{"guild_id":"234567890123456789","destination":"alerts"}', '{"content":"a\\u0000b"}'],
      garbageTarget: ['chat', '"not an object"', '[]'],
      garbageKind: ['edit', '{"message_ref":42}', 'null'],
      nulRef: ['edit', '{"message_ref":"a\\u0000b","seq":1}', '{"content":"z"}'],
      notJsonIds: ['chat', '{"transport":"memory","channel":"general","sender":"ada"}', '{"content":"y"}'],
    } as const;
    for (const [name, [kind, target, body]] of Object.entries(poisons)) await poison(name.padEnd(64, '0'), kind, target, body, name === 'notJsonIds' ? { message_ids: '{not json' } : {});

    const sent: string[] = [];
    for (let i = 0; i < 5; i++) sent.push((await chat.send({ channel: 'general', text: `line ${i}`, sender: i % 2 === 0 ? 'ada' : 'bob' })).id);
    worker.start();
    await waitFor(async () => (await Promise.all(sent.map((id) => chat.get(id)))).every((s) => s.state === 'delivered'), 'the sends accepted after the poison rows delivered', 10_000);
    // Every poison row ended (none waits, or is re-driven, for good), and says why.
    const rows = await waitFor(async () => {
      const r = await sql<{ request_id: string; status: string; reason: string | null }>`select request_id, status, reason from deliveries where payload_hash = 'h' order by request_id`.execute(fixture.store.db);
      return r.rows.every((row) => !['pending', 'in_flight'].includes(row.status)) ? r.rows : undefined;
    }, 'every poison row ended', 10_000);
    expect(rows).toHaveLength(Object.keys(poisons).length);
    // Each ended as its handling decided (a platform that refuses it, a send that goes), or set aside by the worker.
    const ended = Object.fromEntries(rows.map((r) => [r.request_id.replace(/0+$/, ''), r.status === 'delivered' || (['failed', 'unknown'].includes(r.status) && typeof r.reason === 'string')]));
    expect(ended).toEqual(Object.fromEntries(Object.keys(poisons).map((name) => [name, true])));
    // Without their content in the reason.
    expect(rows.map((r) => r.reason).join(' ')).not.toMatch(/not json|ada|\\u/);
  });

  it('a job whose handler throws on its own row is quarantined under its lease (failed, with a reason and no content), logged and counted; the store being down is not the row\'s fault', async () => {
    const registry = new Registry();
    const clock = { now: () => new Date() };
    const queue = deliveryQueue(db());
    worker = new OutboxWorker(queue, clock, pino({ level: 'silent' }), { leaseMs: 30_000, pollMs: 20, concurrency: 2, shutdownGraceMs: 2_000, metrics: new WorkerMetrics(registry) });
    const handled: string[] = [];
    const unreachable = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    worker.register({
      kind: 'chat',
      retry: { maxAttempts: 5, baseMs: 10 },
      handle: async (job, context) => {
        if (job.id.startsWith('down')) throw unreachable;
        // A handler that reads what the row holds: a row whose ids are not JSON throws a SyntaxError.
        JSON.parse(job.row.message_ids ?? '[]');
        handled.push(job.id);
        await sql`update deliveries set status = 'delivered', lease_owner = null where request_id = ${job.id} and lease_owner = ${context.owner}`.execute(fixture.store.db);
      },
    });
    const target = '{"transport":"memory","channel":"general","sender":"ada"}';
    // Each its own content: twins would take turns behind the row whose store is down (src/modules/deliveries/delivery.twins.ts).
    await poison('bad'.padEnd(64, '0'), 'chat', target, '{"content":"bad"}', { message_ids: '{not json: secret' });
    await poison('down'.padEnd(64, '0'), 'chat', target, '{"content":"down"}');
    for (let i = 0; i < 3; i++) await poison(`ok${i}`.padEnd(64, '0'), 'chat', target, `{"content":"ok ${i}"}`);
    worker.start();
    await waitFor(async () => (handled.length === 3 ? true : undefined), 'the good rows handled');
    const bad = await waitFor(async () => {
      const r = await sql<{ status: string; reason: string | null; lease_owner: string | null }>`select status, reason, lease_owner from deliveries where request_id like 'bad%'`.execute(fixture.store.db);
      return r.rows[0]?.status === 'failed' ? r.rows[0] : undefined;
    }, 'the bad row quarantined');
    expect(bad).toEqual({ status: 'failed', reason: 'quarantined: handling this job threw on its own content (SyntaxError)', lease_owner: null });
    expect(await registry.getSingleMetricAsString('herald_outbox_jobs_quarantined_total')).toMatch(/kind="chat"} 1$/m);
    // The row whose handling met an unreachable store is left to be re-driven when its lease expires.
    const down = await sql<{ status: string }>`select status from deliveries where request_id like 'down%'`.execute(fixture.store.db);
    expect(down.rows[0]?.status).toBe('in_flight');
  });
});
