import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { chatSendKind } from '../src/modules/chat/chat.kind.js';
import { ChatService } from '../src/modules/chat/chat.service.js';
import { DeliveryJobs, deliveryQueue, type DeliveryJob } from '../src/modules/deliveries/delivery.jobs.js';
import { DeliveryMetrics } from '../src/modules/deliveries/delivery.metrics.js';
import { DeliveryService } from '../src/modules/deliveries/delivery.service.js';
import { OutboxWorker } from '../src/outbox/worker.js';
import { openStore, type Store } from '../src/platform/db/database.js';
import { ConflictError, InvalidRequestError } from '../src/platform/errors.js';
import { migrateToLatest } from '../src/platform/db/migrate.js';
import type { Database } from '../src/schema.js';
import { MemoryTransport } from '../src/transports/memory/memory-transport.js';
import { transportsOf } from '../src/transports/transport.js';
import { splitForIrc } from '../src/transports/irc/split.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { waitFor } from './support/wait.js';
import { tablesOf } from '../src/platform/db/tables.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';

/** The five chat tools' service on the memory transport: the fast layer, on PGlite or PostgreSQL. */
describe('chat tools on the memory transport', () => {
  let db: TestDatabase;
  let store: Store<Database>;
  let memory: MemoryTransport;
  let chat: ChatService;
  let worker: OutboxWorker<DeliveryJob>;

  beforeAll(async () => {
    db = await testDatabase();
    store = await openStore<Database>({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
    await migrateToLatest(store.db);
    memory = new MemoryTransport();
    memory.addUser('u1', 'Ada').addUser('u2', 'Bob').addChannel('c1', { name: 'general', members: ['u1', 'u2'] });
    const transports = transportsOf(memory);
    const log = pino({ level: 'silent' });
    const clock = { now: () => new Date() };
    // A chat send is a row of the deliveries outbox, kind `chat`, which the chat module declares.
    const ports = { resolveDestination: async () => undefined, isRegistered: async () => false };
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
