import pino from 'pino';
import { sql } from 'kysely';
import { ClaimCursor } from '../src/outbox/leased-table.js';
import { claimDue } from '../src/modules/deliveries/delivery.repository.js';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { chatSendKind } from '../src/modules/chat/chat.kind.js';
import { ChatService } from '../src/modules/chat/chat.service.js';
import { DeliveryJobs, deliveryQueue, type DeliveryJob } from '../src/modules/deliveries/delivery.jobs.js';
import { DeliveryMetrics } from '../src/modules/deliveries/delivery.metrics.js';
import { DeliveryService } from '../src/modules/deliveries/delivery.service.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';
import { OutboxWorker } from '../src/outbox/worker.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { MemoryPlatform } from '../src/platforms/memory/memory-platform.js';
import { platformsOf, type Chat, type Platform } from '../src/platforms/platform.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { waitFor } from './support/wait.js';

/**
 * Fair slots across lanes (src/outbox/lanes.ts): chat sends on a platform that paces each sender on
 * a connection of its own share the worker's pool by sender, so one sender's backlog cannot hold
 * every slot while the others' connections idle, and each sender's sends still start in the order
 * they were accepted.
 */
describe('outbox lanes', () => {
  let fixture: MigratedStore;
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

  describe('the claim', () => {
    const t0 = new Date('2026-12-02T12:00:00Z');
    const at = (ms: number) => new Date(t0.getTime() + ms);
    async function row(id: string, due: Date, kind: 'chat' | 'post', sender = 'ada'): Promise<void> {
      const target = kind === 'chat' ? { transport: 'irc', channel: '#a', sender } : { guild_id: '1', destination: 'alerts' };
      await db()
        .insertInto('deliveries')
        .values({ request_id: id, kind, target: JSON.stringify(target), body: JSON.stringify({ content: `x ${id}` }), payload_hash: 'h', status: 'pending', failure_code: null, created_at: due, next_attempt_at: due })
        .execute();
    }

    it('takes each lane\'s oldest rows, the lanes running fewest first, at most perLane each', async () => {
      const queue = deliveryQueue(db(), undefined, undefined, { pacedBySender: ['irc'], byIdentity: false });
      for (let i = 0; i < 10; i++) await row(`a${i}`, at(i), 'chat', i % 2 === 0 ? 'ada' : 'ADA');
      await row('b0', at(20), 'chat', 'bob');
      await row('b1', at(21), 'chat', 'bob');
      await row('c0', at(30), 'chat', 'cyd');
      const claim = async (limit: number, busy: Record<string, number>) =>
        (await queue.claim('w', at(1_000), 60_000, ['chat'], limit, { busy: new Map(Object.entries(busy)), perLane: 2 })).map((j) => [j.id, j.lane]);
      // Nicks are one connection whatever their case: ada and ADA are one lane.
      expect(await claim(4, {})).toEqual([
        ['a0', 'irc ada'],
        ['a1', 'irc ada'],
        ['b0', 'irc bob'],
        ['c0', 'irc cyd'],
      ]);
      // Ada runs 2 (perLane): her backlog waits; bob runs 1 and takes his next; cyd has no more.
      expect(await claim(4, { 'irc ada': 2, 'irc bob': 1, 'irc cyd': 1 })).toEqual([['b1', 'irc bob']]);
      expect(await claim(4, { 'irc ada': 1, 'irc bob': 2 })).toEqual([['a2', 'irc ada']]);
    });

    it('finds a lane behind a long backlog in a deep claim', async () => {
      const queue = deliveryQueue(db(), undefined, undefined, { pacedBySender: ['irc'], byIdentity: false });
      const values = Array.from({ length: 300 }, (_, i) => ({ request_id: `a${String(i).padStart(3, '0')}`, kind: 'chat' as const, target: JSON.stringify({ transport: 'irc', channel: '#a', sender: 'ada' }), body: JSON.stringify({ content: `x ${i}` }), payload_hash: 'h', status: 'pending' as const, failure_code: null, created_at: at(i), next_attempt_at: at(i) }));
      await db().insertInto('deliveries').values(values).execute();
      await row('b0', at(400), 'chat', 'bob');
      const claim = async (deep: boolean) => (await queue.claim('w', at(1_000), 60_000, ['chat'], 1, { busy: new Map([['irc ada', 1]]), perLane: 2, deep })).map((j) => j.id);
      // Bob's row lies past the rows a claim usually chooses among (SCAN_DEPTH): ada takes the slot.
      expect(await claim(false)).toEqual(['a000']);
      // A deep claim (the worker's, every LANE_DEEP_SCAN_MS) reads them all: bob runs nothing, so he goes first.
      expect(await claim(true)).toEqual(['b0']);
    });

    it('claims rows of no lane oldest first, as without lanes', async () => {
      const queue = deliveryQueue(db(), undefined, undefined, { pacedBySender: ['irc'], byIdentity: false });
      for (let i = 0; i < 10; i++) await row(`p${i}`, at(i), 'post');
      await row('a0', at(-1), 'chat');
      const jobs = await queue.claim('w', at(1_000), 60_000, ['chat', 'post'], 4, { busy: new Map([['irc ada', 2]]), perLane: 2 });
      expect(jobs.map((j) => [j.id, j.lane])).toEqual([
        ['p0', undefined],
        ['p1', undefined],
        ['p2', undefined],
        ['p3', undefined],
      ]);
      // Ada's row was left for her lane, not lost: claimed once she runs fewer, though older than the
      // full batch before (the claim cursor did not move past it).
      expect((await queue.claim('w', at(1_000), 60_000, ['chat', 'post'], 2, { busy: new Map(), perLane: 2 })).map((j) => j.id)).toEqual(['a0', 'p4']);
    });

    it("with several identities, gives every other row its identity's lane: one bot's backlog holds at most perLane", async () => {
      const queue = deliveryQueue(db(), undefined, undefined, { pacedBySender: ['irc'], byIdentity: true });
      const post = (id: string, ms: number, identity: string | null) => ({ request_id: id, kind: 'post' as const, target: JSON.stringify({ guild_id: '1', destination: 'alerts' }), body: JSON.stringify({ content: `x ${id}` }), payload_hash: 'h', status: 'pending' as const, failure_code: null, created_at: at(ms), next_attempt_at: at(ms), identity });
      // The default bot's storm first, then the ops bot's posts, and one IRC line.
      await db().insertInto('deliveries').values([...Array.from({ length: 6 }, (_, i) => post(`d${i}`, i, null)), post('o0', 10, 'ops'), post('o1', 11, 'ops')]).execute();
      await row('a0', at(12), 'chat', 'Ada');
      const jobs = await queue.claim('w', at(1_000), 60_000, ['chat', 'post'], 8, { busy: new Map(), perLane: 3 });
      // The default bot's lane is full at 3 (perLane): its other rows wait; the rest are launched oldest first.
      expect(jobs.map((j) => [j.id, j.lane])).toEqual([
        ['d0', 'as default'],
        ['d1', 'as default'],
        ['d2', 'as default'],
        ['o0', 'as ops'],
        ['o1', 'as ops'],
        ['a0', 'irc ada'],
      ]);
    });

    it('moves the claim cursor when every row has a lane and none was left behind, and keeps it when one was', async () => {
      const post = (id: string, ms: number, identity: string | null) => ({ request_id: id, kind: 'post' as const, target: JSON.stringify({ guild_id: '1', destination: 'alerts' }), body: JSON.stringify({ content: `x ${id}` }), payload_hash: 'h', status: 'pending' as const, failure_code: null, created_at: at(ms), next_attempt_at: at(ms), identity });
      await db().insertInto('deliveries').values(Array.from({ length: 40 }, (_, i) => post(`p${String(i).padStart(2, '0')}`, i, i % 2 === 0 ? null : 'ops'))).execute();
      const rule = { pacedBySender: [], byIdentity: true };
      const cursor = new ClaimCursor(60_000);
      // Two lanes with room: the oldest rows go, whatever their lane; the cursor follows the batch.
      const first = await claimDue(db(), 'w', at(1_000), 60_000, ['post'], 4, { cursor, claimsOverlap: false, lanes: { room: { busy: new Map(), perLane: 100 }, rule } });
      expect(first.map((r) => r.request_id)).toEqual(['p00', 'p01', 'p02', 'p03']);
      expect(cursor.from('post', at(1_001))).toEqual(at(0));
      const second = await claimDue(db(), 'w', at(1_002), 60_000, ['post'], 4, { cursor, claimsOverlap: false, lanes: { room: { busy: new Map(), perLane: 100 }, rule } });
      expect(second.map((r) => r.request_id)).toEqual(['p04', 'p05', 'p06', 'p07']);
      expect(cursor.from('post', at(1_003))).toEqual(at(4));
      // The default bot's lane full: its oldest row is left behind, so the cursor stays where it was.
      const third = await claimDue(db(), 'w', at(1_004), 60_000, ['post'], 4, { cursor, claimsOverlap: false, lanes: { room: { busy: new Map([['as default', 4]]), perLane: 4 }, rule } });
      expect(third.map((r) => r.request_id)).toEqual(['p09', 'p11', 'p13', 'p15']);
      expect(cursor.from('post', at(1_005))).toEqual(at(4));
    });
  });

  describe('the worker', () => {
    let worker: OutboxWorker<DeliveryJob> | undefined;
    afterEach(async () => {
      await worker?.stop();
      worker = undefined;
    });

    /**
     * A chat platform whose sender connections pace their lines in call order (as IRC's `pace()`):
     * each send is recorded when it starts, and waits until its sender is let go.
     */
    function pacedPlatform(): { transport: Platform; started: { sender: string; text: string }[]; let: (sender: string) => void } {
      const memory = new MemoryPlatform();
      memory.addUser('u1', 'Ada').addChannel('c1', { name: 'general', members: ['u1'] });
      const started: { sender: string; text: string }[] = [];
      const gates = new Map<string, { open: boolean; waiting: (() => void)[] }>();
      const gate = (sender: string) => gates.get(sender) ?? gates.set(sender, { open: false, waiting: [] }).get(sender)!;
      const inner = memory.chat;
      const chat: Chat = {
        ...inner,
        pacedBySender: true,
        send: async (channel, text, sender, key, alreadySent, signal, deadline) => {
          started.push({ sender, text });
          const g = gate(sender);
          if (!g.open) {
            await new Promise<void>((resolve, reject) => {
              g.waiting.push(resolve);
              signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
            });
          }
          return inner.send(channel, text, sender, key, alreadySent, signal, deadline);
        },
      };
      const transport = Object.create(memory, { chat: { value: chat } }) as Platform;
      return {
        transport,
        started,
        let: (sender) => {
          const g = gate(sender);
          g.open = true;
          for (const w of g.waiting.splice(0)) w();
        },
      };
    }

    async function start(transport: Platform, concurrency: number): Promise<ChatService> {
      const transports = platformsOf(transport);
      const log = pino({ level: 'silent' });
      // Every accept a millisecond apart: the outbox orders sends by their time.
      let last = 0;
      const clock = { now: () => new Date((last = Math.max(Date.now(), last + 1))) };
      const jobs = new DeliveryJobs(db(), transports, clock, log, new DeliveryMetrics(new Registry()), { nonceWindowMs: 60_000, maxAttempts: 4, retryBaseMs: 10, leaseMs: 30_000 }, { resolveDestination: async () => undefined, isRegistered: async () => false, registeredOn: async () => null });
      jobs.declare(chatSendKind(transports));
      worker = new OutboxWorker(deliveryQueue(db(), undefined, undefined, { pacedBySender: [transport.name], byIdentity: false }), clock, log, { leaseMs: 30_000, pollMs: 20, concurrency, shutdownGraceMs: 2_000 });
      for (const k of jobs.kinds()) worker.register(k);
      const deliveries = new DeliveryService(db(), clock, { post: true, dm: true, edit: true }, { announce: () => worker?.wake() });
      return new ChatService(deliveries, transports, transport.name, clock);
    }

    it('starts another sender\'s send while one sender\'s backlog holds its connection', async () => {
      const platform = pacedPlatform();
      const chat = await start(platform.transport, 4);
      const ada: string[] = [];
      for (let i = 0; i < 12; i++) ada.push((await chat.send({ channel: 'general', text: `ada ${i}`, sender: 'ada' })).id);
      platform.let('bob');
      const bob = (await chat.send({ channel: 'general', text: 'bob 0', sender: 'bob' })).id;
      worker!.start();
      // Before lanes, ada's oldest sends took all 4 slots and waited on her connection: bob's never started.
      await waitFor(async () => (await chat.get(bob)).state === 'delivered', "bob's send delivered while ada's wait", 5_000);
      expect(platform.started.filter((s) => s.sender === 'ada').length).toBeLessThan(12);
      platform.let('ada');
      await waitFor(async () => (await Promise.all(ada.map((id) => chat.get(id)))).every((s) => s.state === 'delivered'), "ada's sends delivered");
    });

    it('keeps each sender\'s sends in the order they were accepted', async () => {
      const platform = pacedPlatform();
      const chat = await start(platform.transport, 8);
      const senders = ['ada', 'bob', 'cyd'];
      const ids: string[] = [];
      // Blocks, one sender after the other, then interleaved.
      for (const sender of senders) for (let i = 0; i < 8; i++) ids.push((await chat.send({ channel: 'general', text: `${sender} ${i}`, sender })).id);
      for (let i = 8; i < 14; i++) for (const sender of senders) ids.push((await chat.send({ channel: 'general', text: `${sender} ${i}`, sender })).id);
      worker!.start();
      for (const sender of senders) platform.let(sender);
      await waitFor(async () => (await Promise.all(ids.map((id) => chat.get(id)))).every((s) => s.state === 'delivered'), 'every send delivered');
      for (const sender of senders) {
        expect(platform.started.filter((s) => s.sender === sender).map((s) => s.text)).toEqual(Array.from({ length: 14 }, (_, i) => `${sender} ${i}`));
      }
    });
  });
});
