import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { REST, Routes, type APIMessage } from 'discord.js';
import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs, QueryResult, RootOperationNode, UnknownRow } from 'kysely';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { DeliveryService } from '../src/modules/deliveries/delivery.service.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';
import { HANDOFF_SCHEMA, handoffContent } from '../src/modules/handoffs/envelope.js';
import { HandoffCatchUp } from '../src/modules/handoffs/handoff.catchup.js';
import { HandoffMetrics } from '../src/modules/handoffs/handoff.metrics.js';
import { HandoffService } from '../src/modules/handoffs/handoff.service.js';
import type { HandoffsDb } from '../src/modules/handoffs/handoff.table.js';
import type { Store } from '../src/infra/db/database.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { DiscordSandbox, SANDBOX_IDS } from '../src/platforms/discord/sandbox/sandbox.js';
import type { Database } from '../src/schema.js';
import { heldHistory } from '../src/platforms/discord/discord-inbound-history.js';
import { DiscordPlatform } from '../src/platforms/discord/discord-platform.js';
import type { InboundHistory, InboundMessage } from '../src/platforms/platform.js';
import { openMigratedStore, testDatabase, type TestDatabase } from './support/db.js';
import { TestClock } from './support/herald.js';
import { waitFor } from './support/wait.js';
import type { HandoffLimits } from '../src/modules/handoffs/settings.js';

/**
 * Handoffs the live stream missed are caught up (PGlite, or PostgreSQL with TEST_DATABASE_URL): a
 * receipt that fails for a transient reason is retried until it is taken in, once; a handoff
 * posted while the receiver held no gateway session is read back from the channels' history when
 * it holds one again (the sandbox answering as Discord does); a sweep over handoffs already taken
 * in takes nothing in twice and refuses nothing.
 */

const SELF = '111111111111111111';
const PEER = '111111111111111112';
const CHANNEL = SANDBOX_IDS.channels.alerts;

let db: TestDatabase | undefined;
const stores: Store<Database>[] = [];
const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  // Everything is closed and dropped even when one close fails; the first failure is reported after.
  const failures: unknown[] = [];
  for (const c of closers.splice(0).reverse()) await Promise.resolve().then(c).catch((err: unknown) => failures.push(err));
  for (const s of stores.splice(0).reverse()) await s.close();
  await db?.drop();
  db = undefined;
  if (failures.length > 0) throw failures[0];
});

/** Log lines written, parsed: what a receiver said (never content). */
function capturedLog(): { log: pino.Logger; lines: { msg: string; level: number }[] } {
  const lines: { msg: string; level: number }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line) as { msg: string; level: number });
      done();
    },
  });
  return { log: pino({ level: 'debug' }, stream), lines };
}

/** Fails the next `n` receipts' queries with a connection error, as an unreachable PostgreSQL would. */
class FailingQueries implements KyselyPlugin {
  constructor(public n: number) {}
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    // Only a receipt's (its lock and replay record), not the inbox the test reads.
    if (this.n > 0 && /pg_advisory_xact_lock|handoff_events/.test(JSON.stringify(args.node))) {
      this.n -= 1;
      throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    }
    return args.node;
  }
  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }
}

async function store(): Promise<Store<Database>> {
  if (stores[0] !== undefined) return stores[0];
  db ??= await testDatabase();
  const s = await openMigratedStore(db);
  stores.push(s);
  return s;
}

interface Receiver {
  service: HandoffService;
  registry: Registry;
  lines: { msg: string; level: number }[];
}

/** A receiving bot's handoff service (a replica: each has its own memory, all share the store). */
async function receiver(self: string, trusted: string, failing?: FailingQueries): Promise<Receiver> {
  const s = await store();
  const clock = new TestClock();
  const config = loadConfig({ HERALD_TRUSTED_BOT_IDS: trusted });
  const deliveries = new DeliveryService(tablesOf<DeliveriesDb>(s.db), clock, { post: true, dm: true, edit: true }, { maxInFlight: 1 });
  const handoffDb = tablesOf<HandoffsDb>(s.db);
  const registry = new Registry();
  const { log, lines } = capturedLog();
  const service = new HandoffService(failing !== undefined ? handoffDb.withPlugin(failing) : handoffDb, deliveries, clock, {
    limits: config.modules['handoffs'] as HandoffLimits,
    selfId: async () => self,
    canSend: true,
    // Catching up only receives: no channel is mapped to send to.
    places: { transport: 'discord', mapped: async () => false, channels: undefined },
    log,
    metrics: new HandoffMetrics(registry),
  });
  closers.push(() => service.close());
  return { service, registry, lines };
}

async function refusals(r: Receiver): Promise<number> {
  const metric = (await r.registry.getMetricsAsJSON()).find((m) => m.name === 'herald_handoffs_received_total');
  return (metric?.values ?? []).filter((v) => v.labels['outcome'] !== 'accepted').reduce((n, v) => n + v.value, 0);
}

function refusedLines(r: Receiver): string[] {
  return r.lines.filter((l) => l.msg === 'handoff refused' || l.level >= 40).map((l) => l.msg);
}

function envelope(source: string, target: string, channelId: string, text: string, threadId: string | null = null): string {
  return handoffContent({
    schema: HANDOFF_SCHEMA,
    source_bot_id: source,
    target_bot_id: target,
    event_id: randomUUID(),
    origin_channel_id: channelId,
    origin_thread_id: threadId,
    origin_message_id: null,
    expires_at: Math.floor(Date.now() / 1000) + 300,
    hop_count: 0,
    payload: { text },
  });
}

let seq = 0;
function message(text: string): InboundMessage {
  seq += 1;
  return {
    channelId: CHANNEL,
    messageId: String(BigInt(Date.now() - 1_420_070_400_000) * 4_194_304n + BigInt(seq)),
    authorId: PEER,
    authorIsBot: true,
    guildId: SANDBOX_IDS.guild,
    createdAt: new Date(),
    content: envelope(PEER, SELF, CHANNEL, text),
  };
}

/** A platform's history as a list of messages, held or not as the test says. */
function listedHistory(messages: InboundMessage[]): InboundHistory & { up: boolean; listeners: Set<() => void> } {
  const listeners = new Set<() => void>();
  const h = {
    up: true,
    listeners,
    held: () => h.up,
    onHeld: (l: () => void) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    channels: async () => [CHANNEL],
    since: async (channelId: string, afterId: string | undefined) => {
      const after = afterId === undefined ? -1n : BigInt(afterId);
      const page = messages.filter((m) => m.channelId === channelId && BigInt(m.messageId) > after).slice(0, 2);
      return { messages: page, last: page.at(-1)?.messageId, complete: page.length < 2 };
    },
  };
  return h;
}

function catchUp(r: Receiver, recent: InboundHistory): HandoffCatchUp {
  const s = stores[0];
  if (s === undefined) throw new Error('no store');
  const c = new HandoffCatchUp({ db: tablesOf<HandoffsDb>(s.db), recent, admit: (m, path) => r.service.admit(m, path), clock: new TestClock(), log: pino({ level: 'silent' }), maxExpirySeconds: 3600, everyMs: 60_000 });
  closers.push(() => c.close());
  return c;
}

describe('a receipt that fails for a transient reason', () => {
  it('is retried with backoff and taken in once when the database answers again', async () => {
    const failing = new FailingQueries(1);
    const r = await receiver(SELF, PEER, failing);
    r.service.take(message('the database was down'));
    const [item] = await waitFor(async () => (await r.service.list(undefined, 10)).items.length > 0 && (await r.service.list(undefined, 10)).items, 'the handoff in the inbox', 10_000);
    expect(failing.n).toBe(0);
    expect(item?.text).toBe('the database was down');
    // Once: nothing more arrives, and no refusal was counted.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await r.service.list(undefined, 10)).items).toHaveLength(1);
    expect(await refusals(r)).toBe(0);
  });
});

describe('catching up from the channels history', () => {
  it('a sweep over handoffs already taken in takes in nothing twice and logs no refusal, on this replica and on a fresh one', async () => {
    const r = await receiver(SELF, PEER);
    const messages = [message('one'), message('two'), message('three')];
    for (const m of messages) r.service.take(m);
    await waitFor(async () => (await r.service.list(undefined, 10)).items.length === 3, 'three handoffs in the inbox');
    const warnedBefore = refusedLines(r).length;
    const first = await catchUp(r, listedHistory(messages)).sweep();
    expect(first.read).toBe(3);
    expect(first.unsettled).toBe(0);
    // A replica that took over: no memory of them, the database says they were taken in.
    const fresh = await receiver(SELF, PEER);
    const second = await catchUp(fresh, listedHistory(messages)).sweep();
    expect(second.unsettled).toBe(0);
    // Taken in concurrently: in any order, each once.
    expect((await r.service.list(undefined, 10)).items.map((i) => i.text).sort()).toEqual(['one', 'three', 'two']);
    expect(refusedLines(r).length).toBe(warnedBefore);
    expect(refusedLines(fresh)).toEqual([]);
    expect(await refusals(r)).toBe(0);
    expect(await refusals(fresh)).toBe(0);
  });

  it('progress is kept per channel: a later sweep reads only what is new', async () => {
    const r = await receiver(SELF, PEER);
    const old = message('old');
    old.createdAt = new Date(Date.now() - 60_000);
    const messages = [old];
    const history = listedHistory(messages);
    await catchUp(r, history).sweep();
    const fresh = message('new');
    messages.push(fresh);
    const next = await catchUp(await receiver(SELF, PEER), history).sweep();
    expect(next.read).toBe(1);
    expect((await r.service.list(undefined, 10)).items.map((i) => i.text)).toEqual(['old', 'new']);
    // Two stores opened (each runs every migration): more than the default budget on a loaded machine.
  }, 90_000);

  it('a message whose receipt failed is not passed over: progress stops before it', async () => {
    const failing = new FailingQueries(1);
    const r = await receiver(SELF, PEER, failing);
    const m = message('retry me');
    m.createdAt = new Date(Date.now() - 60_000);
    const result = await catchUp(r, listedHistory([m])).sweep();
    expect(result.unsettled).toBe(1);
    // The receipt's own retry takes it in.
    await waitFor(async () => (await r.service.list(undefined, 10)).items.length === 1, 'the handoff in the inbox');
  });
});

describe('a handoff posted while the receiving bot had no gateway session', () => {
  it('is in its inbox after its gateway returns, from a channel and from a thread (the sandbox answering as Discord)', async () => {
    const sandbox = await new DiscordSandbox().start();
    closers.push(() => sandbox.close());
    const peer = sandbox.addBot('peer');
    const thread = sandbox.createThread(SANDBOX_IDS.channels.ops, 'handoff work');
    // The receiving bot is the peer; the sandbox's own bot hands off to it.
    const r = await receiver(peer.user.id, sandbox.bot.id);
    const transport = new DiscordPlatform({ token: peer.token, apiUrl: sandbox.apiUrl, timeoutMs: 5_000 });
    let up = false;
    // As the Discord transport assembles it, the gateway's session standing in as `up`.
    const recent = heldHistory(transport.recent, () => up);
    const channels = await recent.channels(AbortSignal.timeout(5_000));
    expect(channels).toEqual(expect.arrayContaining([...Object.values(SANDBOX_IDS.channels), thread.id]));
    expect(channels).not.toContain(SANDBOX_IDS.voiceChannel);
    catchUp(r, recent).start();

    // Posted while the gateway is down: nothing hears them.
    const sender = new REST({ version: '10', api: sandbox.apiUrl }).setToken(sandbox.botToken);
    const post = async (channelId: string, text: string, threadId: string | null = null): Promise<APIMessage> =>
      (await sender.post(Routes.channelMessages(channelId), { body: { content: envelope(sandbox.bot.id, peer.user.id, channelId, text, threadId), allowed_mentions: { parse: [], users: [peer.user.id] } } })) as APIMessage;
    await post(SANDBOX_IDS.channels.ops, 'in a channel');
    await post(thread.id, 'in a thread', thread.id);
    // The receiver's own message and an ordinary one are passed over.
    await new REST({ version: '10', api: sandbox.apiUrl }).setToken(peer.token).post(Routes.channelMessages(SANDBOX_IDS.channels.ops), { body: { content: 'hello' } });
    expect((await r.service.list(undefined, 10)).items).toEqual([]);

    // The gateway returns: the session is ready on this process.
    up = true;
    recent.nowHeld();
    const items = await waitFor(async () => {
      const { items } = await r.service.list(undefined, 10);
      return items.length === 2 && items;
    }, 'both handoffs in the inbox');
    expect(items.map((i) => [i.text, i.origin.channel_id, i.origin.thread_id])).toEqual([
      ['in a channel', SANDBOX_IDS.channels.ops, null],
      ['in a thread', thread.id, thread.id],
    ]);
    expect(refusedLines(r)).toEqual([]);
  });
});
