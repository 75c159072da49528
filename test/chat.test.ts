import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Registry } from 'prom-client';
import { chatSendKind } from '../src/modules/chat/chat.kind.js';
import { ChatService } from '../src/modules/chat/chat.service.js';
import { DeliveryJobs, deliveryQueue, type DeliveryJob } from '../src/modules/deliveries/delivery.jobs.js';
import { DeliveryMetrics } from '../src/modules/deliveries/delivery.metrics.js';
import { DeliveryService } from '../src/modules/deliveries/delivery.service.js';
import { OutboxWorker } from '../src/outbox/worker.js';
import { openStore, type Store } from '../src/infra/db/database.js';
import { ConflictError, InvalidRequestError } from '../src/infra/errors.js';
import { migrateToLatest } from '../src/infra/db/migrate.js';
import type { Database } from '../src/schema.js';
import { MemoryPlatform } from '../src/platforms/memory/memory-platform.js';
import { platformsOf } from '../src/platforms/platform.js';
import { splitForIrc } from '../src/platforms/irc/split.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { waitFor } from './support/wait.js';
import { tablesOf } from '../src/infra/db/tables.js';
import type { DeliveriesDb, DeliveryRow } from '../src/modules/deliveries/delivery.table.js';
import { chatRequestId } from '../src/modules/chat/chat.kind.js';
import { RECONCILE_SETTLE_MS } from '../src/modules/deliveries/delivery.reconcile.js';
import { findDelivery } from '../src/modules/deliveries/delivery.repository.js';

/** The five chat tools' service on the memory transport: the fast layer, on PGlite or PostgreSQL. */
describe('chat tools on the memory transport', () => {
  let db: TestDatabase;
  let store: Store<Database>;
  let memory: MemoryPlatform;
  let chat: ChatService;
  let worker: OutboxWorker<DeliveryJob>;

  beforeAll(async () => {
    db = await testDatabase();
    store = await openStore<Database>({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
    await migrateToLatest(store.db);
    memory = new MemoryPlatform();
    memory.addUser('u1', 'Ada').addUser('u2', 'Bob').addChannel('c1', { name: 'general', members: ['u1', 'u2'] });
    const transports = platformsOf(memory);
    const log = pino({ level: 'silent' });
    const clock = { now: () => new Date() };
    // A chat send is a row of the deliveries outbox, kind `chat`, which the chat module declares.
    const ports = { resolveDestination: async () => undefined, isRegistered: async () => false, registeredOn: async () => null };
    const jobs = new DeliveryJobs(tablesOf<DeliveriesDb>(store.db), transports, clock, log, new DeliveryMetrics(new Registry()), { nonceWindowMs: 60_000, maxAttempts: 4, retryBaseMs: 10, leaseMs: 10_000 }, ports);
    jobs.declare(chatSendKind(transports));
    worker = new OutboxWorker(deliveryQueue(tablesOf<DeliveriesDb>(store.db)), clock, log, { leaseMs: 10_000, pollMs: 20, concurrency: 4, shutdownGraceMs: 1_000 });
    for (const k of jobs.kinds()) worker.register(k);
    worker.start();
    const deliveries = new DeliveryService(tablesOf<DeliveriesDb>(store.db), clock, { post: true, dm: true, edit: true }, { announce: () => worker.wake() });
    chat = new ChatService(deliveries, transports, 'memory', clock);
  });
  afterAll(async () => {
    await worker?.stop();
    await store?.close();
    await db?.drop();
  });

  const settled = (id: string) =>
    waitFor(async () => {
      const s = await chat.get(id);
      return s.state !== 'pending' ? s : undefined;
    }, 'the send to settle');

  it('sends under the sender\'s name and reads newest first', async () => {
    const a = await chat.send({ channel: '#general', text: 'first', sender: 'ada' });
    expect(a.state).toBe('pending');
    expect(await settled(a.id)).toMatchObject({ state: 'delivered', transport: 'memory', sender: 'ada' });
    await settled((await chat.send({ channel: 'general', text: 'second', sender: 'bob' })).id);
    const read = await chat.read('general');
    expect(read.messages.slice(0, 2).map((m) => [m.nick, m.text])).toEqual([
      ['bob', 'second'],
      ['ada', 'first'],
    ]);
    expect((await chat.read('general', undefined, undefined, 1)).messages).toHaveLength(1);
  });

  it('since keeps only later messages; a bad since is a 400 with a clear reason', async () => {
    const mark = new Date();
    await new Promise((r) => setTimeout(r, 5));
    await settled((await chat.send({ channel: 'general', text: 'after', sender: 'ada' })).id);
    expect((await chat.read('general', undefined, mark.toISOString())).messages.map((m) => m.text)).toEqual(['after']);
    await expect(chat.read('general', undefined, 'last tuesday')).rejects.toThrow(InvalidRequestError);
  });

  it('a repeated request_id returns the same send; another payload under it is refused', async () => {
    const id = 'ab'.repeat(16);
    const first = await chat.send({ channel: 'general', text: 'once', sender: 'ada', request_id: id });
    const again = await chat.send({ channel: 'general', text: 'once', sender: 'ada', request_id: id });
    expect(again.id).toBe(first.id);
    await settled(id);
    expect(memory.messages.filter((m) => m.message.content === 'once')).toHaveLength(1);
    await expect(chat.send({ channel: 'general', text: 'twice', sender: 'ada', request_id: id })).rejects.toThrow(ConflictError);
  });

  it('an answer lost after the platform took the message: the retry finds it and sends nothing more', async () => {
    memory.inject({ op: 'send', afterCreate: true, failure: { kind: 'transient', detail: 'connection reset', mayHaveCreated: true } });
    const s = await chat.send({ channel: 'general', text: 'lost answer', sender: 'ada' });
    expect(await settled(s.id)).toMatchObject({ state: 'delivered' });
    expect(memory.messages.filter((m) => m.message.content === 'lost answer')).toHaveLength(1);
  });

  it('a refusal fails the send with its reason', async () => {
    memory.inject({ op: 'send', failure: { kind: 'rejected', detail: 'memory: refused' } });
    const s = await chat.send({ channel: 'general', text: 'refused', sender: 'ada' });
    expect(await settled(s.id)).toMatchObject({ state: 'failed', reason: 'memory: refused' });
  });

  it('channels and members; Herald itself is never a member', async () => {
    expect(await chat.createChannel('#random')).toEqual({ transport: 'memory', channel: 'random' });
    expect((await chat.listChannels()).channels).toEqual(expect.arrayContaining(['general', 'random']));
    expect((await chat.members('general')).members).toEqual(['Ada', 'Bob']);
    expect((await chat.members('random')).members).toEqual([]);
  });

  it('bad input is refused before anything is stored', async () => {
    await expect(chat.send({ channel: 'general', text: '   ', sender: 'ada' })).rejects.toThrow('text must not be blank');
    await expect(chat.send({ channel: 'two words', text: 'x', sender: 'ada' })).rejects.toThrow(InvalidRequestError);
    await expect(chat.send({ channel: 'general', text: 'x', sender: 'ada', transport: 'irc' })).rejects.toThrow('transport irc is not configured for chat');
  });
});

/**
 * A chat send follows the one in-doubt rule of every send: a failure that may have created
 * something records a doubt window, the platform is asked for proof only when in doubt and only
 * once the window has settled, and after the last attempt one claim only looks. A movable clock
 * stands for the settle's seconds.
 */
describe('a chat send in doubt', () => {
  let db: TestDatabase;
  let store: Store<Database>;
  let memory: MemoryPlatform;
  let chat: ChatService;
  let worker: OutboxWorker<DeliveryJob>;
  let offsetMs = 0;
  const clock = { now: () => new Date(Date.now() + offsetMs) };
  const rowOf = async (id: string): Promise<DeliveryRow | undefined> => findDelivery(tablesOf<DeliveriesDb>(store.db), chatRequestId(id));

  beforeAll(async () => {
    db = await testDatabase();
    store = await openStore<Database>({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
    await migrateToLatest(store.db);
    memory = new MemoryPlatform({ now: clock.now });
    memory.addUser('u1', 'Ada').addChannel('c1', { name: 'general', members: ['u1'] });
    const transports = platformsOf(memory);
    const log = pino({ level: 'silent' });
    const ports = { resolveDestination: async () => undefined, isRegistered: async () => false, registeredOn: async () => null };
    // Two attempts; leases far longer than the clock's jumps, so no jump expires one.
    const jobs = new DeliveryJobs(tablesOf<DeliveriesDb>(store.db), transports, clock, log, new DeliveryMetrics(new Registry()), { nonceWindowMs: 60_000, maxAttempts: 2, retryBaseMs: 10, leaseMs: 120_000 }, ports);
    jobs.declare(chatSendKind(transports));
    worker = new OutboxWorker(deliveryQueue(tablesOf<DeliveriesDb>(store.db)), clock, log, { leaseMs: 120_000, pollMs: 20, concurrency: 4, shutdownGraceMs: 1_000 });
    for (const k of jobs.kinds()) worker.register(k);
    worker.start();
    const deliveries = new DeliveryService(tablesOf<DeliveriesDb>(store.db), clock, { post: true, dm: true, edit: true }, { announce: () => worker.wake() });
    chat = new ChatService(deliveries, transports, 'memory', clock);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    await worker?.stop();
    await store?.close();
    await db?.drop();
  });

  /** The row once it waits for its doubt window to settle, after `attempts` attempts. */
  const settling = (id: string, attempts: number) =>
    waitFor(async () => {
      const r = await rowOf(id);
      const until = r?.doubt_until?.getTime();
      return r !== undefined && r.status === 'pending' && r.attempts === attempts && until !== undefined && r.next_attempt_at.getTime() === until + RECONCILE_SETTLE_MS ? r : undefined;
    }, `the send to wait for its doubt to settle after attempt ${attempts}`);
  const finished = (id: string) =>
    waitFor(async () => {
      const r = await rowOf(id);
      return r !== undefined && r.status !== 'pending' && r.status !== 'in_flight' ? r : undefined;
    }, 'the send to finish');

  it('a failure after the platform took the line records the doubt window; the retry proves only once it settled, and sends nothing twice', async () => {
    const prove = memory.chat.sentParts.bind(memory.chat);
    const provedAt: Date[] = [];
    const sentParts = vi.spyOn(memory.chat, 'sentParts').mockImplementation(async (...args) => {
      provedAt.push(clock.now());
      return prove(...args);
    });
    memory.inject({ op: 'send', afterCreate: true, failure: { kind: 'transient', detail: 'connection reset', mayHaveCreated: true } });
    const started = clock.now();
    const s = await chat.send({ channel: 'general', text: 'doubted line', sender: 'ada' });
    const waiting = await settling(s.id, 1);
    // The doubt shows in the row like a post's: from the attempt's start, in the target channel.
    expect(waiting.doubt_from?.getTime()).toBeGreaterThanOrEqual(started.getTime());
    expect(waiting.doubt_until?.getTime()).toBeGreaterThanOrEqual(waiting.doubt_from?.getTime() ?? Infinity);
    expect(waiting.doubt_channel_id).toBe('general');
    expect(sentParts).not.toHaveBeenCalled();
    const settlesAt = (waiting.doubt_until?.getTime() ?? 0) + RECONCILE_SETTLE_MS;

    offsetMs += RECONCILE_SETTLE_MS + 1_000;
    const done = await finished(s.id);
    expect(done).toMatchObject({ status: 'delivered', doubt_from: null, doubt_until: null });
    expect(provedAt).toHaveLength(1);
    expect(provedAt[0]?.getTime()).toBeGreaterThanOrEqual(settlesAt);
    expect(memory.messages.filter((m) => m.message.content === 'doubted line')).toHaveLength(1);
    expect(await chat.get(s.id)).toMatchObject({ state: 'delivered', message_ids: [memory.messages.find((m) => m.message.content === 'doubted line')?.id] });
  });

  it('a retry after a failure that certainly created nothing sends again without asking the platform for proof', async () => {
    const sentParts = vi.spyOn(memory.chat, 'sentParts');
    const send = vi.spyOn(memory.chat, 'send');
    memory.inject({ op: 'send', failure: { kind: 'transient', detail: 'memory: busy', mayHaveCreated: false } });
    const s = await chat.send({ channel: 'general', text: 'certainly not sent', sender: 'ada' });
    const done = await finished(s.id);
    expect(done).toMatchObject({ status: 'delivered', attempts: 2, doubt_from: null });
    expect(send).toHaveBeenCalledTimes(2);
    expect(sentParts).not.toHaveBeenCalled();
    expect(memory.messages.filter((m) => m.message.content === 'certainly not sent')).toHaveLength(1);
  });

  it('re-driven after its process died mid-send: in doubt from the attempt\'s start, proven once settled, the line not sent twice', async () => {
    const sentParts = vi.spyOn(memory.chat, 'sentParts');
    const id = 'cd'.repeat(16);
    const text = 'died mid-send';
    // A dead process's attempt: it got the line out, then died holding the lease.
    await memory.chat.send('general', text, 'ada', id, new Map(), new AbortController().signal);
    const now = clock.now().getTime();
    const startedAt = new Date(now - 5_000);
    await tablesOf<DeliveriesDb>(store.db)
      .insertInto('deliveries')
      .values({
        request_id: chatRequestId(id),
        kind: 'chat',
        target: JSON.stringify({ transport: 'memory', channel: 'general', sender: 'ada' }),
        body: JSON.stringify({ content: text }),
        payload_hash: 'x',
        status: 'in_flight',
        created_at: startedAt,
        next_attempt_at: startedAt,
        attempts: 1,
        attempt_started_at: startedAt,
        lease_owner: 'a dead process',
        lease_expires_at: new Date(now - 1_000),
      })
      .execute();
    worker.wake();
    const waiting = await settling(id, 1);
    expect(waiting.doubt_from?.getTime()).toBe(startedAt.getTime());
    expect(sentParts).not.toHaveBeenCalled();
    offsetMs += RECONCILE_SETTLE_MS + 1_000;
    expect(await finished(id)).toMatchObject({ status: 'delivered', doubt_from: null });
    expect(sentParts).toHaveBeenCalledTimes(1);
    expect(memory.messages.filter((m) => m.message.content === text)).toHaveLength(1);
  });

  it('in doubt and out of attempts: one final claim only looks; the platform cannot tell, so unknown in the outbox and unconfirmed with the reason on the chat wire', async () => {
    // The second attempt's proof finds nothing (it sends again); the final look cannot tell.
    const sentParts = vi.spyOn(memory.chat, 'sentParts').mockResolvedValueOnce(new Map()).mockResolvedValueOnce(undefined);
    const send = vi.spyOn(memory.chat, 'send');
    memory.inject({ op: 'send', failure: { kind: 'transient', detail: 'connection reset', mayHaveCreated: true }, times: 2 });
    const s = await chat.send({ channel: 'general', text: 'never told', sender: 'ada' });
    await settling(s.id, 1);
    offsetMs += RECONCILE_SETTLE_MS + 1_000;
    // The last attempt fails in doubt again: a final check is due once its window settled.
    const last = await settling(s.id, 2);
    expect(last.reason).toBe('final check of an in-doubt delivery');
    expect(send).toHaveBeenCalledTimes(2);
    offsetMs += RECONCILE_SETTLE_MS + 1_000;
    const done = await finished(s.id);
    const reason = 'an earlier attempt may have sent it, and the platform cannot tell whether it did';
    expect(done).toMatchObject({ status: 'unknown', reason, attempts: 3 });
    expect(done.doubt_from).not.toBeNull();
    // The final claim looked and sent nothing.
    expect(sentParts).toHaveBeenCalledTimes(2);
    expect(send).toHaveBeenCalledTimes(2);
    expect(await chat.get(s.id)).toEqual({ id: s.id, transport: 'memory', channel: 'general', sender: 'ada', state: 'unconfirmed', reason });
  });

  it('in doubt and out of attempts: the final look finds nothing, so failed, and the final claim sends nothing', async () => {
    const sentParts = vi.spyOn(memory.chat, 'sentParts').mockResolvedValue(new Map());
    const send = vi.spyOn(memory.chat, 'send');
    memory.inject({ op: 'send', failure: { kind: 'transient', detail: 'connection reset', mayHaveCreated: true }, times: 2 });
    const s = await chat.send({ channel: 'general', text: 'never created', sender: 'ada' });
    await settling(s.id, 1);
    offsetMs += RECONCILE_SETTLE_MS + 1_000;
    await settling(s.id, 2);
    offsetMs += RECONCILE_SETTLE_MS + 1_000;
    const done = await finished(s.id);
    expect(done).toMatchObject({ status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE', attempts: 3, doubt_from: null });
    expect(sentParts).toHaveBeenCalledTimes(2);
    expect(send).toHaveBeenCalledTimes(2);
    expect(await chat.get(s.id)).toMatchObject({ state: 'failed', reason: 'attempts exhausted; the channel shows nothing was created' });
  });
});

describe('splitting text for IRC lines', () => {
  it('never exceeds the byte budget, never cuts a grapheme, and loses nothing', () => {
    const samples = ['a'.repeat(1000), 'Grüße 👩‍👩‍👧‍👦 '.repeat(80), '🇫🇷'.repeat(300), 'word '.repeat(300), 'ñ'.repeat(777)];
    for (const text of samples) {
      // Budgets above the largest grapheme here (25 bytes); only a grapheme longer than a whole line is ever cut.
      for (const max of [26, 50, 400]) {
        const parts = splitForIrc(text, max);
        expect(parts.join('')).toBe(text);
        // Every cut falls on a grapheme boundary of the original text.
        const boundaries = new Set([...new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(text)].map((s) => s.index));
        let at = 0;
        for (const p of parts) {
          expect(Buffer.byteLength(p)).toBeLessThanOrEqual(max);
          expect(boundaries.has(at)).toBe(true);
          at += p.length;
        }
      }
    }
    // Flags (two code points) stay whole across cuts.
    expect(splitForIrc('🇫🇷🇫🇷🇫🇷', 9)).toEqual(['🇫🇷', '🇫🇷', '🇫🇷']);
  });

  it('breaks after a space where it can, and ends a part at a line break', () => {
    expect(splitForIrc('hello big world', 11)).toEqual(['hello big ', 'world']);
    expect(splitForIrc('one\ntwo\r\n\nthree', 100)).toEqual(['one', 'two', 'three']);
  });
});
