import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { DeliveryService } from '../src/modules/deliveries/delivery.service.js';
import { HANDOFF_SCHEMA, handoffContent } from '../src/modules/handoffs/envelope.js';
import { HandoffService } from '../src/modules/handoffs/handoff.service.js';
import type { Store } from '../src/infra/db/database.js';
import type { Database } from '../src/schema.js';
import type { InboundMessage } from '../src/platforms/platform.js';
import { onPostgres, openMigratedStore, testDatabase, type TestDatabase } from './support/db.js';
import { TestClock } from './support/herald.js';
import { tablesOf } from '../src/infra/db/tables.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';
import type { HandoffsDb } from '../src/modules/handoffs/handoff.table.js';
import type { HandoffLimits } from '../src/modules/handoffs/settings.js';

/** Receiving needs no place to send to: no channel is mapped. */
const NOWHERE = { transport: 'discord', mapped: async () => false, channels: undefined };

/**
 * Receiving handoffs against the database (PGlite, or PostgreSQL with TEST_DATABASE_URL): replay,
 * capacity and rate are decided there, so a second receiver (another replica) agrees.
 */

const SELF = '111111111111111111';
const PEER = '111111111111111112';
const OTHER_PEER = '111111111111111113';
const CHANNEL = '345678901234567890';
const silent = pino({ level: 'silent' });

let db: TestDatabase | undefined;
const stores: Store<Database>[] = [];
afterEach(async () => {
  for (const s of stores.splice(0).reverse()) await s.close();
  await db?.drop();
  db = undefined;
});

async function receiver(clock: TestClock, env: Record<string, string> = {}): Promise<HandoffService> {
  db ??= await testDatabase();
  const store = await openMigratedStore(db);
  stores.push(store);
  const config = loadConfig({ HERALD_TRUSTED_BOT_IDS: `${PEER},${OTHER_PEER}`, ...env });
  const deliveries = new DeliveryService(tablesOf<DeliveriesDb>(store.db), clock, { post: true, dm: true, edit: true }, { maxInFlight: 1 });
  return new HandoffService(tablesOf<HandoffsDb>(store.db), deliveries, clock, { limits: config.modules['handoffs'] as HandoffLimits, selfId: async () => SELF, canSend: true, log: silent, places: NOWHERE });
}

/** A second receiver on the same database: its own pool on PostgreSQL; on PGlite (one process per data folder) another service on the same store. */
async function secondReceiver(clock: TestClock): Promise<HandoffService> {
  if (onPostgres) return receiver(clock);
  const store = stores[0];
  if (store === undefined) throw new Error('no first receiver');
  const config = loadConfig({ HERALD_TRUSTED_BOT_IDS: `${PEER},${OTHER_PEER}` });
  return new HandoffService(tablesOf<HandoffsDb>(store.db), new DeliveryService(tablesOf<DeliveriesDb>(store.db), clock, { post: true, dm: true, edit: true }), clock, { limits: config.modules['handoffs'] as HandoffLimits, selfId: async () => SELF, canSend: true, log: silent, places: NOWHERE });
}

let seq = 0;
function handoff(clock: TestClock, options: { source?: string; eventId?: string; text?: string } = {}): InboundMessage {
  const source = options.source ?? PEER;
  seq += 1;
  return {
    channelId: CHANNEL,
    messageId: String(400000000000000000n + BigInt(seq)),
    authorId: source,
    authorIsBot: true,
    guildId: '234567890123456789',
    createdAt: clock.now(),
    content: handoffContent({
      schema: HANDOFF_SCHEMA,
      source_bot_id: source,
      target_bot_id: SELF,
      event_id: options.eventId ?? randomUUID(),
      origin_channel_id: CHANNEL,
      origin_thread_id: null,
      origin_message_id: null,
      expires_at: Math.floor(clock.now().getTime() / 1000) + 300,
      hop_count: 0,
      payload: { text: options.text ?? 'summarise the alerts' },
    }),
  };
}

describe('receiving handoffs into the inbox', () => {
  it('an accepted handoff is listed with its source, origin and text, and gone once acknowledged', async () => {
    const clock = new TestClock();
    const herald = await receiver(clock);
    const m = handoff(clock, { text: '@everyone and <@111111111111111113>: raw, for the agent' });
    expect(await herald.receive(m)).toBe('accepted');
    const page = await herald.list(undefined, 50);
    expect(page.items).toHaveLength(1);
    const [item] = page.items;
    expect(item).toMatchObject({ source_bot_id: PEER, text: '@everyone and <@111111111111111113>: raw, for the agent', origin: { channel_id: CHANNEL, thread_id: null, message_id: null, handoff_message_id: m.messageId } });
    expect(page.next_cursor).toBe(item?.id);
    expect((await herald.list(page.next_cursor ?? undefined, 50)).items).toEqual([]);
    expect(await herald.ack([item?.id ?? ''])).toBe(1);
    expect(await herald.ack([item?.id ?? ''])).toBe(0);
    expect((await herald.list(undefined, 50)).items).toEqual([]);
  });

  it('a payload of 1,800 characters is accepted whole', async () => {
    const clock = new TestClock();
    const herald = await receiver(clock);
    const text = 'z'.repeat(1800);
    expect(await herald.receive(handoff(clock, { text }))).toBe('accepted');
    expect((await herald.list(undefined, 1)).items[0]?.text).toBe(text);
  });

  it('handoffs are off, both ways, while HERALD_TRUSTED_BOT_IDS is empty', async () => {
    const clock = new TestClock();
    const herald = await receiver(clock, { HERALD_TRUSTED_BOT_IDS: '' });
    expect(await herald.receive(handoff(clock))).toBe('not_candidate');
    await expect(herald.send({ request_id: 'c'.repeat(64), target_bot_id: PEER, channel_id: CHANNEL, text: 'x' })).rejects.toThrow('handoffs are off: HERALD_TRUSTED_BOT_IDS is empty');
  });

  it('a rejected candidate never reaches the inbox', async () => {
    const clock = new TestClock();
    const herald = await receiver(clock);
    const m = handoff(clock);
    expect(await herald.receive({ ...m, authorId: OTHER_PEER })).toBe('source_mismatch');
    expect(await herald.receive({ ...m, authorIsBot: false })).toBe('not_candidate');
    // A trusted peer's payload holding U+0000 is refused, not a failed insert.
    expect(await herald.receive(handoff(clock, { text: 'a\u0000b' }))).toBe('payload');
    expect((await herald.list(undefined, 50)).items).toEqual([]);
  });

  it('waits for the next handoff, bounded, and answers null when none comes', async () => {
    const clock = new TestClock();
    const herald = await receiver(clock);
    const started = Date.now();
    expect(await herald.next(undefined, 300)).toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    const waiting = herald.next(undefined, 20_000);
    expect(await herald.receive(handoff(clock, { text: 'late' }))).toBe('accepted');
    expect((await waiting)?.text).toBe('late');
  });
});

describe('replay, capacity and rate, in the database', () => {
  it('a second copy of an event is a replay, on the same receiver and on a second one', async () => {
    const clock = new TestClock();
    const first = await receiver(clock);
    const second = await secondReceiver(clock);
    const eventId = randomUUID();
    expect(await first.receive(handoff(clock, { eventId }))).toBe('accepted');
    expect(await first.receive(handoff(clock, { eventId }))).toBe('replay');
    expect(await second.receive(handoff(clock, { eventId }))).toBe('replay');
    expect((await second.list(undefined, 50)).items).toHaveLength(1);
  });

  it('an event_id in another case is the same event: a replay, whichever case came first, on either receiver', async () => {
    const clock = new TestClock();
    const first = await receiver(clock);
    const second = await secondReceiver(clock);
    const lower = randomUUID();
    expect(await first.receive(handoff(clock, { eventId: lower }))).toBe('accepted');
    expect(await first.receive(handoff(clock, { eventId: lower.toUpperCase() }))).toBe('replay');
    expect(await second.receive(handoff(clock, { eventId: `${lower.slice(0, 9)}${lower.slice(9).toUpperCase()}` }))).toBe('replay');
    const upper = randomUUID().toUpperCase();
    expect(await second.receive(handoff(clock, { eventId: upper }))).toBe('accepted');
    expect(await first.receive(handoff(clock, { eventId: upper.toLowerCase() }))).toBe('replay');
    expect((await first.list(undefined, 50)).items).toHaveLength(2);
  });

  it('two receivers taking the same message at once accept it once', async () => {
    const clock = new TestClock();
    const first = await receiver(clock);
    const second = await secondReceiver(clock);
    const m = handoff(clock);
    const outcomes = await Promise.all([first.receive(m), second.receive(m), first.receive(m), second.receive(m)]);
    expect(outcomes.filter((o) => o === 'accepted')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'replay')).toHaveLength(3);
  });

  it('the 4,096 live entries cap fails closed: a new handoff is refused, none is evicted; expired ones do not count', async () => {
    const clock = new TestClock();
    const herald = await receiver(clock);
    const store = stores[0];
    if (store === undefined) throw new Error('no store');
    const live = new Date(clock.now().getTime() + 300_000);
    await sql`insert into handoff_events (event_id, source_bot_id, outcome, received_at, expires_at)
      select 'filler-' || n, ${OTHER_PEER}, 'accepted', ${new Date(0)}, ${live} from generate_series(1, 4096) as n`.execute(store.db);
    expect(await herald.receive(handoff(clock))).toBe('replay_capacity');
    const count = await sql<{ n: string }>`select count(*)::text as n from handoff_events`.execute(store.db);
    expect(count.rows[0]?.n).toBe('4096');
    // One entry expires: there is room for exactly one more.
    await sql`update handoff_events set expires_at = ${new Date(clock.now().getTime() - 1)} where event_id = 'filler-1'`.execute(store.db);
    expect(await herald.receive(handoff(clock))).toBe('accepted');
    expect(await herald.receive(handoff(clock))).toBe('replay_capacity');
  });

  it('11 handoffs from one bot in a minute: 10 accepted, the 11th refused (and spent), other bots unaffected; the next minute accepts again', async () => {
    const clock = new TestClock();
    const first = await receiver(clock);
    const second = await secondReceiver(clock);
    const outcomes = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? first : second).receive(handoff(clock))));
    expect(outcomes).toEqual(Array(10).fill('accepted'));
    const eleventh = handoff(clock);
    expect(await first.receive(eleventh)).toBe('rate_limited');
    // The replay record was written before the rate check: the same event again is a replay.
    expect(await second.receive(eleventh)).toBe('replay');
    expect(await first.receive(handoff(clock, { source: OTHER_PEER }))).toBe('accepted');
    expect((await first.list(undefined, 100)).items).toHaveLength(11);
    clock.offsetMs += 61_000;
    expect(await second.receive(handoff(clock))).toBe('accepted');
  });

  it('the limits come from the environment', async () => {
    const clock = new TestClock();
    const herald = await receiver(clock, { HERALD_HANDOFF_RATE_LIMIT: '1', HERALD_HANDOFF_REPLAY_CAPACITY: '2' });
    expect(await herald.receive(handoff(clock))).toBe('accepted');
    expect(await herald.receive(handoff(clock))).toBe('rate_limited');
    expect(await herald.receive(handoff(clock, { source: OTHER_PEER }))).toBe('replay_capacity');
  });
});
