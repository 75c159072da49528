import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, type IrcLine } from 'irc-framework';
import { startIrcd, type Ircd } from '../support/inspircd.js';

/**
 * `npm run bench -- --only=irc`: chat lines flooded through `POST /mcp/chat/messages` to a few
 * channels of a throwaway InspIRCd (test/support/inspircd.ts) under several sender nicks, by one
 * Herald process; an IRC client of the bench's own (not Herald's connection code) joined to every
 * channel reads them, with their `+herald/delivery` key, and every QUIT it sees.
 *
 * The floor is what the flood limits allow. Each sender nick has a connection of its own
 * (src/platforms/irc/irc-platform.ts), so per connection the limit is the smaller of the server's
 * allowance (test/irc/inspircd.conf: `commandrate`, in millicommands per second, with `fakelag`
 * off, so a connection over it is quit with "Excess Flood") and Herald's pacing
 * (HERALD_IRC_LINES_PER_SECOND); the floor is N / (that rate × connections). A second floor also
 * lets each connection's burst go at once (Herald's, 5 lines: src/platforms/irc/irc-connection.ts,
 * and the server's `threshold`).
 *
 * Three rounds, each after a warm-up (a line per sender in every channel, unmeasured: a sender's
 * connection opens on its first line) and a pause for each connection's burst to come back:
 * - paced: HERALD_IRC_LINES_PER_SECOND at its default (4), the lines posted round-robin over the
 *   senders and channels, as agents chatting at once;
 * - blocks: the same, but each sender's lines posted as one block after the other's (one agent
 *   floods, then the next): whether the outbox keeps every connection busy or serialises them;
 * - allowance: another Herald, HERALD_IRC_LINES_PER_SECOND at the server's own allowance, so the
 *   floor is the server's and what is measured is Herald's own ceiling.
 *
 * Reported per round: the time from the first POST to the last line read, the floors and the ratio
 * (target ≤ 1.10), lines per second reaching the channels, lines lost and duplicated (target 0),
 * QUITs for flood (target 0) and Herald's own final states.
 */

const CONF = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../irc/inspircd.conf');
const CHANNELS = ['#bench-a', '#bench-b', '#bench-c'] as const;
const SENDERS = ['ada', 'bob', 'cyd', 'dee'] as const;
const WATCHER_NICK = 'benchwatch';
/** HERALD_IRC_LINES_PER_SECOND's default (src/platforms/irc/index.ts). */
const HERALD_DEFAULT_LPS = 4;
/** Lines a connection sends back to back before Herald's pacing spaces them (BURST, src/platforms/irc/irc-connection.ts). */
const HERALD_BURST = 5;
const FLOOD_QUIT = /excess flood|recvq exceeded|sendq exceeded/i;

/** What run.ts lends this phase: a Herald process on its throwaway PostgreSQL database. */
export interface IrcFloodHarness {
  /** Empty the deliveries table (chat sends are its rows). */
  truncate(): Promise<void>;
  /** Start one Herald process (serve, which dispatches too) with this extra environment. */
  start(env: Record<string, string>): Promise<IrcFloodHerald>;
  /** Concurrent POSTs. */
  connections: number;
}

export interface IrcFloodHerald {
  url: string;
  bridge: Record<string, string>;
  /** Its log so far (printed, warnings and errors only, with BENCH_IRC_DEBUG set). */
  output?: () => string;
  stop(): Promise<void>;
}

/** The server's flood limits per connection, read from the config the throwaway InspIRCd runs with. */
export function serverAllowance(conf = readFileSync(CONF, 'utf8')): { linesPerSecond: number; burst: number; fakelag: boolean } {
  const connect = /<connect\b[^>]*>/.exec(conf)?.[0] ?? '';
  const attr = (name: string, fallback: string): string => new RegExp(`\\b${name}="([^"]*)"`).exec(connect)?.[1] ?? fallback;
  // InspIRCd's defaults when unset: commandrate 1000 (1 line/s), threshold 10, fakelag on.
  return { linesPerSecond: Number(attr('commandrate', '1000')) / 1000, burst: Number(attr('threshold', '10')), fakelag: attr('fakelag', 'yes') !== 'off' && attr('fakelag', 'yes') !== 'no' };
}

/** The bench's own reader: every channel line with its key and when it came, and every QUIT. */
class Watcher {
  readonly seen = new Map<string, { count: number; at: number; nick: string }>();
  readonly quits: { nick: string; reason: string }[] = [];
  readonly joined = new Map<string, Set<string>>();
  private readonly client = new Client();
  private lastAt = 0;

  constructor(private readonly port: number) {}

  async start(): Promise<void> {
    const client = this.client;
    client.requestCap(['message-tags']);
    client.use((_c, raw) =>
      raw.use((command, line, _raw, _cl, next) => {
        try {
          this.read(command, line);
        } finally {
          next();
        }
      }),
    );
    client.on('error', () => undefined);
    const registered = new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('the bench watcher did not register')), 10_000);
      client.once('registered', () => (clearTimeout(t), resolve()));
    });
    client.connect({ host: '127.0.0.1', port: this.port, nick: WATCHER_NICK, username: 'bench', gecos: 'bench watcher', auto_reconnect: false, version: null, enable_echomessage: false, message_max_length: 100_000 });
    await registered;
    for (const ch of CHANNELS) client.raw('JOIN', ch);
    await until('the bench watcher in every channel', 10_000, () => CHANNELS.every((c) => this.joined.get(c)?.has(WATCHER_NICK) === true));
  }

  stop(): void {
    this.client.removeAllListeners();
    this.client.on('error', () => undefined);
    try {
      this.client.connection.end();
    } catch {
      // already gone
    }
  }

  /** Forget what was read (a new round). */
  reset(): void {
    this.seen.clear();
    this.quits.length = 0;
    this.lastAt = 0;
  }

  /** When (performance.now()) the newest expected line was read. */
  get last(): number {
    return this.lastAt;
  }

  private read(command: string, line: IrcLine): void {
    if (command === 'JOIN') {
      const ch = (line.params[0] ?? '').toLowerCase();
      const set = this.joined.get(ch) ?? new Set<string>();
      set.add(line.nick.toLowerCase());
      this.joined.set(ch, set);
    } else if (command === 'PART') {
      this.joined.get((line.params[0] ?? '').toLowerCase())?.delete(line.nick.toLowerCase());
    } else if (command === 'QUIT') {
      for (const set of this.joined.values()) set.delete(line.nick.toLowerCase());
      this.quits.push({ nick: line.nick, reason: line.params[0] ?? '' });
    } else if (command === 'PRIVMSG') {
      const tag = line.tags['+herald/delivery'];
      if (typeof tag !== 'string') return;
      // `key` or `key:i/n` (a long text's part i of n): these lines are one part each.
      const key = tag.replace(/:\d+\/\d+$/, '');
      const s = this.seen.get(key) ?? { count: 0, at: 0, nick: line.nick };
      s.count += 1;
      s.at = performance.now();
      this.lastAt = s.at;
      this.seen.set(key, s);
    }
  }
}

async function until(what: string, timeoutMs: number, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface Round {
  name: 'paced' | 'blocks' | 'allowance';
  lines: number;
  /** Each sender's lines posted as one block, sender after sender. */
  blocks: boolean;
}

interface Running {
  url: string;
  bridge: Record<string, string>;
  linesPerSecond: number;
  output(): string;
}

interface ChatRequest {
  request_id: string;
  channel: string;
  sender: string;
  transport: 'irc';
  text: string;
}

const round2 = (x: number): number => Math.round(x * 100) / 100;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function chatRequest(channel: string, sender: string, text: string): ChatRequest {
  return { request_id: randomBytes(16).toString('hex'), channel, sender, transport: 'irc', text };
}

/** POST every request, `connections` at a time, in order. */
async function postAll(h: Running, requests: readonly ChatRequest[], connections: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < requests.length) {
        const r = requests[next++];
        const res = await fetch(`${h.url}/mcp/chat/messages`, { method: 'POST', headers: { 'content-type': 'application/json', ...h.bridge }, body: JSON.stringify(r) });
        await res.text();
        if (res.status !== 202) throw new Error(`irc flood POST: ${res.status}`);
      }
    }),
  );
}

/**
 * One line per sender in every channel, not measured: each sender's connection is open and in
 * every channel before the clock starts (a connection opens on a nick's first line), and then
 * each connection's burst has come back. Answers how long the connections took to open.
 */
async function warmUp(h: Running, watcher: Watcher, connections: number): Promise<number> {
  const t0 = performance.now();
  const requests = SENDERS.flatMap((s) => CHANNELS.map((c) => chatRequest(c, s, `warm-up ${s}`)));
  await postAll(h, requests, connections);
  await until('the warm-up lines', 60_000, () => requests.every((r) => watcher.seen.has(r.request_id)));
  const seconds = (performance.now() - t0) / 1000;
  await sleep(((HERALD_BURST + 1) * 1000) / h.linesPerSecond + 200);
  return seconds;
}

async function runRound(h: Running, watcher: Watcher, round: Round, connections: number): Promise<Record<string, number | string>> {
  const server = serverAllowance();
  watcher.reset();
  const perSender = Math.ceil(round.lines / SENDERS.length);
  const requests = Array.from({ length: round.lines }, (_, i) => {
    const sender = round.blocks ? SENDERS[Math.floor(i / perSender)] : SENDERS[i % SENDERS.length];
    const channel = CHANNELS[(round.blocks ? i : Math.floor(i / SENDERS.length)) % CHANNELS.length];
    return chatRequest(channel ?? CHANNELS[0], sender ?? SENDERS[0], `bench line ${i}`);
  });
  const keys = new Set(requests.map((r) => r.request_id));
  const counts = new Map<string, number>();
  for (const r of requests) counts.set(r.sender, (counts.get(r.sender) ?? 0) + 1);
  // The floors: per connection the smaller of the server's allowance and Herald's pacing.
  const rate = Math.min(server.linesPerSecond, h.linesPerSecond);
  const burst = Math.min(server.burst, HERALD_BURST);
  const floor = round.lines / (rate * SENDERS.length);
  const burstFloor = Math.max(...[...counts.values()].map((n) => Math.max(0, n - burst) / rate));

  const t0 = performance.now();
  await postAll(h, requests, connections);
  const accepted = (performance.now() - t0) / 1000;
  const arrived = () => [...keys].filter((k) => watcher.seen.has(k)).length;
  // Long enough for every sender's lines one after the other, and some.
  const deadline = Date.now() + (floor * (SENDERS.length + 1) + 30) * 1000;
  while (arrived() < keys.size && Date.now() < deadline) await sleep(20);
  const seconds = (watcher.last - t0) / 1000;
  const firstLine = (Math.min(...[...keys].map((k) => watcher.seen.get(k)?.at ?? Infinity)) - t0) / 1000;
  // A line sent twice comes soon after the first: wait a little before counting.
  await sleep(1_000);
  const lost = keys.size - arrived();
  let duplicates = 0;
  for (const k of keys) duplicates += Math.max(0, (watcher.seen.get(k)?.count ?? 0) - 1);
  const floodQuits = watcher.quits.filter((q) => FLOOD_QUIT.test(q.reason)).length;
  const otherQuits = watcher.quits.length - floodQuits;
  // Herald's own answer for each send.
  const states: Record<string, number> = {};
  let i = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (i < requests.length) {
        const r = requests[i++];
        const res = await fetch(`${h.url}/mcp/chat/messages/${r?.request_id ?? ''}`, { headers: h.bridge });
        const state = res.status === 200 ? ((await res.json()) as { state: string }).state : `http ${res.status}`;
        states[state] = (states[state] ?? 0) + 1;
      }
    }),
  );
  const ratio = Math.round((seconds / floor) * 1000) / 1000;
  if (process.env['BENCH_IRC_DEBUG'] !== undefined) {
    // Lines read per half second, per sender.
    for (const s of SENDERS) {
      const buckets: number[] = [];
      for (const k of keys) {
        const x = watcher.seen.get(k);
        if (x?.nick !== s) continue;
        const b = Math.floor((x.at - t0) / 500);
        buckets[b] = (buckets[b] ?? 0) + 1;
      }
      console.log(`    ${s}: ${Array.from(buckets, (n) => n ?? 0).join(' ')}`);
    }
  }
  const name = `irc ${round.name}`;
  console.log(
    `  ${name}: ${round.lines} lines, ${SENDERS.length} senders × ${CHANNELS.length} channels, ${round.blocks ? 'posted sender by sender' : 'posted round-robin'}, Herald paced at ${h.linesPerSecond}/s per connection, server allows ${server.linesPerSecond}/s (burst ${server.burst}, fakelag ${server.fakelag ? 'on' : 'off'}): ` +
      `${seconds.toFixed(2)} s, ${(round.lines / seconds).toFixed(1)} lines/s (floor ${round2(floor)} s = ${round.lines} / (min(${server.linesPerSecond}, ${h.linesPerSecond})/s × ${SENDERS.length} connections), ratio ${ratio}, target ≤ 1.10; with each connection's burst of ${burst}: ${round2(burstFloor)} s, ratio ${round2(seconds / burstFloor)}); ` +
      `first line read after ${firstLine.toFixed(2)} s, all accepted in ${accepted.toFixed(2)} s; lost ${lost}, duplicates ${duplicates}, flood QUITs ${floodQuits}, other QUITs ${otherQuits}; Herald's states ${JSON.stringify(states)}`,
  );
  return {
    [`${name} lines`]: round.lines,
    [`${name} s`]: round2(seconds),
    [`${name} lines/s`]: Math.round((round.lines / seconds) * 10) / 10,
    [`${name} Herald lines/s per connection`]: h.linesPerSecond,
    [`${name} server lines/s per connection`]: server.linesPerSecond,
    [`${name} connections`]: SENDERS.length,
    [`${name} floor s`]: round2(floor),
    [`${name} ÷ floor`]: ratio,
    [`${name} floor is`]: `${round.lines} / (min(server ${server.linesPerSecond}, Herald ${h.linesPerSecond}) lines/s × ${SENDERS.length} connections)`,
    [`${name} burst floor s`]: round2(burstFloor),
    [`${name} ÷ burst floor`]: round2(seconds / burstFloor),
    [`${name} first line s`]: round2(firstLine),
    [`${name} accepted in s`]: round2(accepted),
    [`${name} lost`]: lost,
    [`${name} duplicates`]: duplicates,
    [`${name} flood QUITs`]: floodQuits,
    [`${name} delivered`]: states['delivered'] ?? 0,
  };
}

/** One Herald paced at `linesPerSecond`, warmed up, through `rounds`; stopped after, also on failure. */
async function withHerald(harness: IrcFloodHarness, ircd: Ircd, watcher: Watcher, linesPerSecond: number, rounds: Round[]): Promise<Record<string, number | string>> {
  await harness.truncate();
  const t = performance.now();
  const debug = (what: string): void => void (process.env['BENCH_IRC_DEBUG'] !== undefined && console.log(`    ${((performance.now() - t) / 1000).toFixed(1)} s: ${what}`));
  const started = await harness.start({
    HERALD_IRC_URL: ircd.url,
    HERALD_IRC_NICK: 'herald',
    HERALD_IRC_CHANNELS: CHANNELS.join(','),
    HERALD_IRC_LINES_PER_SECOND: String(linesPerSecond),
  });
  const h: Running = { url: started.url, bridge: started.bridge, linesPerSecond, output: started.output ?? (() => '') };
  debug('Herald started');
  try {
    await until("Herald's observer in every channel", 15_000, () => CHANNELS.every((c) => watcher.joined.get(c)?.has('herald') === true));
    const row: Record<string, number | string> = {};
    for (const r of rounds) {
      debug('warming up');
      const connect = await warmUp(h, watcher, harness.connections);
      debug(`round ${r.name}`);
      Object.assign(row, await runRound(h, watcher, r, harness.connections));
      debug('round done');
      row[`irc ${r.name} warm-up s`] = round2(connect);
    }
    if (process.env['BENCH_IRC_DEBUG'] !== undefined) {
      for (const line of h.output().split('\n')) if (/"level":(40|50|60)/.test(line)) console.log(`    herald: ${line.slice(0, 300)}`);
    }
    return row;
  } finally {
    await started.stop();
    debug('Herald stopped');
  }
}

export async function ircFlood(harness: IrcFloodHarness, quick: boolean): Promise<Record<string, number | string>> {
  const began = performance.now();
  const ircd = await startIrcd();
  const watcher = new Watcher(ircd.port);
  try {
    await watcher.start();
    const server = serverAllowance();
    const lines = quick ? 64 : 480;
    const row: Record<string, number | string> = {};
    Object.assign(
      row,
      await withHerald(harness, ircd, watcher, HERALD_DEFAULT_LPS, [
        { name: 'paced', lines, blocks: false },
        { name: 'blocks', lines, blocks: true },
      ]),
    );
    // HERALD_IRC_LINES_PER_SECOND allows at most 1000 (src/platforms/irc/index.ts).
    Object.assign(row, await withHerald(harness, ircd, watcher, Math.min(1000, server.linesPerSecond), [{ name: 'allowance', lines: quick ? 200 : 2_000, blocks: false }]));
    console.log(`  irc phase: ${((performance.now() - began) / 1000).toFixed(1)} s in all`);
    return row;
  } finally {
    watcher.stop();
    await ircd.dispose();
  }
}
