import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { DiscordSandbox, SANDBOX_IDS } from '../../src/platforms/discord/sandbox/sandbox.js';

/**
 * `npm run bench -- --only=hear`: how soon an agent hears what it waits for, end to end, each
 * sample beside a floor taken from the same messages in the same run:
 *
 * - inbox: a person's message mentioning bot A, posted through the sandbox's control API
 *   (`POST /sandbox/api/messages`), until A's `GET /mcp/inbox/next` (already waiting) returns it.
 *   Floor: the same MESSAGE_CREATE reaching a bare gateway client (a third bot of the sandbox,
 *   a raw WebSocket with the Message Content intent, in this process), from the same start.
 * - handoff: `POST /mcp/handoffs` on Herald A until Herald B's waiting `GET /mcp/handoffs/inbox/next`
 *   returns it, and B's waiting `GET /mcp/inbox/next` (the same handoff as an event of kind handoff).
 *   Split at the moment the bare client sees the handoff message (A's side: accept, outbox,
 *   dispatcher, REST create; B's side: receipt, store, wake, answer). Floor: bot A's own REST create
 *   of a plain message (no Herald) until the bare client receives it: one REST create and one
 *   gateway dispatch, which no handoff can beat.
 *
 * Each round takes one sample of each, after a few unmeasured rounds; a waiter is parked a moment
 * before its message is posted, so each sample measures the wake path (NOTIFY / in-process news),
 * not an answer that was already there. Herald runs with its defaults (HERALD_POLL_MS 1000: a
 * waiter's fallback poll every 250 ms), except the handoff rate limit, raised for the samples.
 * BENCH_HEAR_ENV (a JSON object) adds to both Heralds' environment, e.g. BENCH_HEAR_ENV='{"HERALD_POLL_MS":"60000"}'
 * to show the figures do not rest on a poll (the waits are woken by news of the commit, not found by
 * their fallback poll).
 *
 * Also reported, to place A's side: when A's REST create reaches the sandbox after the POST, and how
 * many channel lookups (GET /channels/{id}) A made per handoff, beside a plain delivery from A to a
 * mapped destination (same outbox and dispatcher): POST /mcp/deliveries → create at the sandbox and
 * → the bare client.
 */

export interface HearStore {
  databaseUrl: string | undefined;
  dataDir: string;
  close(): Promise<void>;
}

export interface HearHerald {
  url: string;
  bridge: Record<string, string>;
  admin: Record<string, string>;
  stop(): Promise<void>;
}

/** What run.ts lends this phase: throwaway stores of the run's kind and its way of starting `herald serve`. */
export interface HearHarness<S extends HearStore> {
  /** A fresh, migrated store (a PostgreSQL database, or a PGlite folder), of the kind being measured. */
  store(): Promise<S>;
  /** `herald serve` on that store and this sandbox, with this extra environment. */
  start(store: S, sandbox: DiscordSandbox, env: Record<string, string>): Promise<HearHerald>;
}

/** Added to both Heralds' environment (see above). */
const EXPERIMENT = JSON.parse(process.env['BENCH_HEAR_ENV'] ?? '{}') as Record<string, string>;
const WARM_UP = 5;
/** Between a waiter's request and the message it waits for: long enough for the request to be parked. */
const PARK_MS = 20;
const WAIT_MS = 10_000;
const CHANNELS = [SANDBOX_IDS.channels.alerts, SANDBOX_IDS.channels.deals, SANDBOX_IDS.channels.digest, SANDBOX_IDS.channels.ops];
/** GatewayIntentBits: Guilds, GuildMessages, MessageContent. */
const INTENTS = 1 | (1 << 9) | (1 << 15);

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN);
}
const ms = (x: number): number => Math.round(x * 10) / 10;
const ratio = (a: number, b: number): number => Math.round((a / b) * 100) / 100;
const sleep = (t: number): Promise<void> => new Promise((r) => setTimeout(r, t));

/** p50 and p99 of a list of ms. */
function stats(xs: number[]): { p50: number; p99: number } {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: ms(percentile(s, 50)), p99: ms(percentile(s, 99)) };
}

/**
 * A bare gateway client: IDENTIFY as a bot of the sandbox, note when each MESSAGE_CREATE arrives
 * (by message id, and by a handoff envelope's event_id). No discord.js: the floor of hearing.
 */
class BareGateway {
  private readonly seen = new Map<string, number>();
  private readonly waiting = new Map<string, (at: number) => void>();
  private socket: WebSocket | undefined;

  async connect(sandboxUrl: string, token: string): Promise<void> {
    const socket = new WebSocket(`${sandboxUrl.replace(/^http/, 'ws')}/gateway`);
    this.socket = socket;
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.on('message', (raw: Buffer) => {
        const at = performance.now();
        const p = JSON.parse(raw.toString()) as { op: number; t?: string; d?: { id?: string; content?: string } };
        if (p.op === 10) socket.send(JSON.stringify({ op: 2, d: { token, intents: INTENTS, properties: { os: 'linux', browser: 'bench', device: 'bench' } } }));
        if (p.t === 'READY') resolve();
        if (p.t !== 'MESSAGE_CREATE' || p.d?.id === undefined) return;
        this.note(p.d.id, at);
        const key = /"event_id":"([^"]+)"/.exec(p.d.content ?? '')?.[1] ?? /\bkey:([0-9a-f]+)/.exec(p.d.content ?? '')?.[1];
        if (key !== undefined) this.note(key, at);
      });
    });
  }

  /** When the message (by id, a handoff's event_id, or the `key:` its content names) arrived (performance.now()). */
  when(key: string, timeoutMs = WAIT_MS): Promise<number> {
    const at = this.seen.get(key);
    if (at !== undefined) return Promise.resolve(at);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the bare gateway client never saw ${key}`)), timeoutMs);
      this.waiting.set(key, (t) => {
        clearTimeout(timer);
        resolve(t);
      });
    });
  }

  close(): void {
    this.socket?.terminate();
  }

  private note(key: string, at: number): void {
    this.seen.set(key, at);
    this.waiting.get(key)?.(at);
    this.waiting.delete(key);
  }
}

async function json<T>(res: Response, what: string): Promise<T> {
  const text = await res.text();
  if (!res.ok) throw new Error(`${what}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

/**
 * Wait on `path` (a `/next` route taking `after`) until an item matching `match` comes back: when
 * (performance.now()) it did, and the cursor after it.
 */
async function waitUntilHeard<T extends { id: string }>(herald: HearHerald, path: string, field: string, after: string, match: (item: T) => boolean): Promise<{ at: number; cursor: string }> {
  const deadline = Date.now() + WAIT_MS;
  let cursor = after;
  for (;;) {
    const res = await fetch(`${herald.url}${path}?after=${cursor}&timeout_ms=${WAIT_MS}`, { headers: herald.bridge });
    const body = await json<Record<string, T | null>>(res, `GET ${path}`);
    const at = performance.now();
    const item = body[field];
    if (item !== null && item !== undefined) {
      cursor = item.id;
      if (match(item)) return { at, cursor };
    }
    if (Date.now() > deadline) throw new Error(`${path}: nothing matching within ${WAIT_MS} ms`);
  }
}

export async function hearLatency<S extends HearStore>(harness: HearHarness<S>, samples: number): Promise<Record<string, number>> {
  const sandbox = await new DiscordSandbox().start();
  const stores: S[] = [];
  const heralds: HearHerald[] = [];
  const bare = new BareGateway();
  try {
    const helper = sandbox.addBot('helper');
    const observer = sandbox.addBot('observer');
    const botA = sandbox.bot.id;
    const botB = helper.user.id;
    const setupFrom = performance.now();
    const made = await Promise.allSettled([harness.store(), harness.store()]);
    for (const r of made) if (r.status === 'fulfilled') stores.push(r.value);
    const notMade = made.find((r) => r.status === 'rejected');
    if (notMade !== undefined) throw notMade.reason;
    const [storeA, storeB] = stores as [S, S];
    const started = await Promise.allSettled([
      harness.start(storeA, sandbox, { HERALD_TRUSTED_BOT_IDS: botB, ...EXPERIMENT }),
      // Receipts are limited to 10 per source bot a minute by default: the samples are more.
      harness.start(storeB, sandbox, { DISCORD_TOKEN: helper.token, HERALD_TRUSTED_BOT_IDS: botA, HERALD_HANDOFF_RATE_LIMIT: '100000', ...EXPERIMENT }),
    ]);
    for (const r of started) if (r.status === 'fulfilled') heralds.push(r.value);
    const failed = started.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    const [a, b] = heralds as [HearHerald, HearHerald];
    await bare.connect(sandbox.url, observer.token);
    const deadline = Date.now() + 60_000;
    while (sandbox.gatewaySessions < 3 || sandbox.commands.length === 0) {
      if (Date.now() > deadline) throw new Error(`hear: ${sandbox.gatewaySessions} of 3 gateway sessions after 60 s`);
      await sleep(50);
    }
    // A's destinations: for the plain deliveries compared with handoffs, where handoffs may go (a
    // mapped channel), and every channel the rounds mention A in (a mention is heard only where a
    // destination maps the channel).
    for (const [destination, channelId] of Object.entries(SANDBOX_IDS.channels)) {
      const mapped = await fetch(`${a.url}/admin/destinations/${SANDBOX_IDS.guild}/${destination}`, { method: 'PUT', headers: { 'content-type': 'application/json', ...a.admin }, body: JSON.stringify({ channel_id: channelId }) });
      await json(mapped, 'PUT /admin/destinations');
    }
    const setupS = Math.round((performance.now() - setupFrom) / 100) / 10;
    const measureFrom = performance.now();

    const inbox = { total: [] as number[], floor: [] as number[], herald: [] as number[] };
    const handoff = { next: [] as number[], inboxNext: [] as number[], aSide: [] as number[], bSide: [] as number[], accept: [] as number[], floor: [] as number[], create: [] as number[], lookups: 0 };
    const delivery = { onDiscord: [] as number[], create: [] as number[] };
    /** When (ms since the epoch) the sandbox got the first request matching, at or after `from`. */
    const arrived = (from: number, method: string, path: string): number => sandbox.requests.find((r) => r.at >= from && r.method === method && r.path === path)?.at ?? NaN;
    let inboxCursorA = '0';
    let handoffCursorB = '0';
    let inboxCursorB = '0';
    for (let round = 0; round < WARM_UP + samples; round++) {
      const keep = round >= WARM_UP;
      const channelId = CHANNELS[round % CHANNELS.length] ?? SANDBOX_IDS.channels.ops;

      // A person mentions bot A; A's agent is waiting on /mcp/inbox/next.
      // Matched by a tag known before posting (the answer may come back before the POST's own).
      const tag = `bench ${round} ${randomBytes(4).toString('hex')}`;
      const heardA = waitUntilHeard<{ id: string; content: string }>(a, '/mcp/inbox/next', 'event', inboxCursorA, (e) => e.content.endsWith(tag));
      heardA.catch(() => undefined); // awaited below; not unhandled meanwhile
      await sleep(PARK_MS);
      const t0 = performance.now();
      const posted = await fetch(`${sandbox.url}/sandbox/api/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ userId: SANDBOX_IDS.user, channelId, content: `<@${botA}> ${tag}` }),
      });
      const messageId = (await json<{ id: string }>(posted, 'POST /sandbox/api/messages')).id;
      const [heard, seen] = await Promise.all([heardA, bare.when(messageId)]);
      inboxCursorA = heard.cursor;
      if (keep) {
        inbox.total.push(heard.at - t0);
        inbox.floor.push(seen - t0);
        inbox.herald.push(heard.at - seen);
      }

      // A hands a task to B; B's agent waits on both of its inboxes.
      const task = `bench handoff ${round} ${randomBytes(4).toString('hex')}`;
      const handoffNext = waitUntilHeard<{ id: string; text: string }>(b, '/mcp/handoffs/inbox/next', 'handoff', handoffCursorB, (h) => h.text === task);
      const inboxNext = waitUntilHeard<{ id: string; kind: string; content: string }>(b, '/mcp/inbox/next', 'event', inboxCursorB, (e) => e.kind === 'handoff' && e.content === task);
      handoffNext.catch(() => undefined);
      inboxNext.catch(() => undefined);
      await sleep(PARK_MS);
      const t1 = performance.now();
      const t1Epoch = Date.now();
      const requestsBefore = sandbox.requests.length;
      const sent = await fetch(`${a.url}/mcp/handoffs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...a.bridge },
        body: JSON.stringify({ request_id: randomBytes(32).toString('hex'), target_bot_id: botB, channel_id: channelId, text: task }),
      });
      const accepted = performance.now();
      const eventId = (await json<{ handoff: { event_id: string } }>(sent, 'POST /mcp/handoffs')).handoff.event_id;
      const [got, gotInbox, onDiscord] = await Promise.all([handoffNext, inboxNext, bare.when(eventId)]);
      handoffCursorB = got.cursor;
      inboxCursorB = gotInbox.cursor;
      if (keep) {
        handoff.next.push(got.at - t1);
        handoff.inboxNext.push(gotInbox.at - t1);
        handoff.accept.push(accepted - t1);
        handoff.aSide.push(onDiscord - t1);
        handoff.bSide.push(got.at - onDiscord);
        handoff.create.push(arrived(t1Epoch, 'POST', `/channels/${channelId}/messages`) - t1Epoch);
        handoff.lookups += sandbox.requests.slice(requestsBefore).filter((r) => r.method === 'GET' && r.path === `/channels/${channelId}`).length;
      }

      // A plain delivery from A (same outbox and dispatcher, no handoff), to compare A's side with.
      const key = randomBytes(6).toString('hex');
      const t3 = performance.now();
      const t3Epoch = Date.now();
      const delivered = await fetch(`${a.url}/mcp/deliveries`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...a.bridge },
        body: JSON.stringify({ request_id: randomBytes(32).toString('hex'), kind: 'post', target: { guild_id: SANDBOX_IDS.guild, destination: 'alerts' }, body: { content: `bench delivery key:${key}` } }),
      });
      await json(delivered, 'POST /mcp/deliveries');
      const deliveredAt = await bare.when(key);
      if (keep) {
        delivery.onDiscord.push(deliveredAt - t3);
        delivery.create.push(arrived(t3Epoch, 'POST', `/channels/${SANDBOX_IDS.channels.alerts}/messages`) - t3Epoch);
      }

      // The floor: bot A itself creates a plain message (no Herald), the bare client receives it.
      const t2 = performance.now();
      const created = await fetch(`${sandbox.apiUrl}/v10/channels/${channelId}/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bot ${sandbox.botToken}` },
        body: JSON.stringify({ content: `bench floor ${round}` }),
      });
      const floorId = (await json<{ id: string }>(created, 'POST /channels/{id}/messages')).id;
      const floorAt = await bare.when(floorId);
      if (keep) handoff.floor.push(floorAt - t2);
    }

    const measureS = Math.round((performance.now() - measureFrom) / 100) / 10;
    console.log(`  hear: set up in ${setupS} s, measured in ${measureS} s`);
    const it = stats(inbox.total);
    const iFloor = stats(inbox.floor);
    const iHerald = stats(inbox.herald);
    const hn = stats(handoff.next);
    const hi = stats(handoff.inboxNext);
    const hFloor = stats(handoff.floor);
    const hA = stats(handoff.aSide);
    const hB = stats(handoff.bSide);
    const hAcc = stats(handoff.accept);
    const hCreate = stats(handoff.create);
    const dOn = stats(delivery.onDiscord);
    const dCreate = stats(delivery.create);
    console.log(
      `  hear, ${samples} samples: mention → /mcp/inbox/next p50 ${it.p50} ms p99 ${it.p99} ms (floor: bare gateway client p50 ${iFloor.p50} p99 ${iFloor.p99}; Herald after the dispatch p50 ${iHerald.p50} p99 ${iHerald.p99})`,
    );
    console.log(
      `  hear: POST /mcp/handoffs → B's /mcp/handoffs/inbox/next p50 ${hn.p50} ms p99 ${hn.p99} ms, → B's /mcp/inbox/next p50 ${hi.p50} p99 ${hi.p99} (A's side p50 ${hA.p50} p99 ${hA.p99}, of it the 202 p50 ${hAcc.p50}; B's side p50 ${hB.p50} p99 ${hB.p99}; floor: bot REST create → bare gateway client p50 ${hFloor.p50} p99 ${hFloor.p99})`,
    );
    console.log(
      `  hear: A's create reaches the sandbox p50 ${hCreate.p50} ms after POST /mcp/handoffs (${handoff.lookups} channel lookups for ${samples} handoffs) vs ${dCreate.p50} ms after POST /mcp/deliveries; a delivery on Discord p50 ${dOn.p50} p99 ${dOn.p99}`,
    );
    return {
      'hear samples': samples,
      'inbox mention→next p50 ms': it.p50,
      'inbox mention→next p99 ms': it.p99,
      'inbox floor bare gateway p50 ms': iFloor.p50,
      'inbox floor bare gateway p99 ms': iFloor.p99,
      'inbox ÷ floor p50': ratio(it.p50, iFloor.p50),
      'inbox ÷ floor p99': ratio(it.p99, iFloor.p99),
      'inbox dispatch→next p50 ms': iHerald.p50,
      'inbox dispatch→next p99 ms': iHerald.p99,
      'handoff POST→next p50 ms': hn.p50,
      'handoff POST→next p99 ms': hn.p99,
      'handoff POST→inbox next p50 ms': hi.p50,
      'handoff POST→inbox next p99 ms': hi.p99,
      'handoff floor REST→gateway p50 ms': hFloor.p50,
      'handoff floor REST→gateway p99 ms': hFloor.p99,
      'handoff ÷ floor p50': ratio(hn.p50, hFloor.p50),
      'handoff ÷ floor p99': ratio(hn.p99, hFloor.p99),
      'handoff 202 p50 ms': hAcc.p50,
      'handoff POST→on Discord p50 ms': hA.p50,
      'handoff POST→on Discord p99 ms': hA.p99,
      'handoff on Discord→next p50 ms': hB.p50,
      'handoff on Discord→next p99 ms': hB.p99,
      'handoff POST→create at sandbox p50 ms': hCreate.p50,
      'handoff channel lookups per send': ratio(handoff.lookups, samples),
      'delivery POST→create at sandbox p50 ms': dCreate.p50,
      'delivery POST→on Discord p50 ms': dOn.p50,
      'delivery POST→on Discord p99 ms': dOn.p99,
    };
  } finally {
    bare.close();
    await Promise.all(heralds.map((h) => h.stop().catch(() => undefined)));
    await Promise.all(stores.map((st) => st.close().catch(() => undefined)));
    await sandbox.close();
  }
}
