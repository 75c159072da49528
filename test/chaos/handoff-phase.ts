import path from 'node:path';
import pg from 'pg';
import { handoffDeliveryId } from '../../src/modules/handoffs/handoff.service.js';
import { DiscordSandbox, SANDBOX_IDS, type Fault, type SandboxMessage } from '../../src/platforms/discord/sandbox/sandbox.js';
import { heraldEnv, newToken } from '../support/herald.js';
import { waitFor } from '../support/wait.js';
import { deliveryRows, HERALD_TIMINGS, logLines, makeSchedule, memberSpecs, sleepWhile, type PhaseContext, type PhaseResult } from './campaign.js';
import { Fleet, startWatchdog, type MemberSpec } from './fleet.js';
import { newAgentStats, ReceivingAgent, SendingAgent, type AgentContext, type BotSide, type InboxJson, type ReadItem, type SentHandoffTrack, type SentJson } from './handoff-agents.js';
import { verifyHandoffs, type FinalHandoff, type ReceiptStory } from './handoff-verify.js';
import { countSandboxRequests, preparePhaseDatabase, readFinals, readFromApiOnly, settle, startChaos } from './phase-kit.js';
import { Rng } from './prng.js';

/**
 * The handoff phase of the chaos campaign: two Herald bots in one sandbox Discord, A (the sandbox's
 * own bot) and B (a second bot of the sandbox), each a deployment of its own (its token, its
 * database on the throwaway cluster, its `serve` holding the gateway and its `dispatch`), trusting
 * each other. Agents of each hand tasks to the other (channels and a thread) and read their own
 * bot's inbox, while processes of both deployments are SIGKILLed, PostgreSQL is stopped hard, and
 * Discord faults creates. The verdict: each handoff one message in Discord, one item in the other
 * bot's inbox, the right way round, final states as the contract says.
 */

const PHASE = 'handoffs';
/** Handoffs go to these channels, and to a thread of #ops made for the phase. */
const CHANNELS = [SANDBOX_IDS.channels.alerts, SANDBOX_IDS.channels.deals, SANDBOX_IDS.channels.digest, SANDBOX_IDS.channels.ops];
const ROUTE_LIMIT = { limit: 5, windowMs: 1_000 };
/** After its sender reports it delivered, this long for it to show in the other bot's inbox while settling. */
const RECEIPT_GRACE_MS = 10_000;
const CREATE = '^/channels/[0-9]+/messages$';

/** Discord's faults on creates (every handoff is a create). */
function randomCreateFault(rng: Rng): [string, Fault] {
  // Past Herald's Discord timeout (read here, not at load: campaign.ts and this module import each other).
  const past = () => Number(HERALD_TIMINGS.HERALD_DISCORD_TIMEOUT_MS) + rng.int(200, 1_500);
  const kind = rng.weighted([
    ['create 5xx', 3],
    ['create 429', 2],
    ['create timeout', 2],
    ['drop_after_create', 3],
    ['delay_after_create', 3],
    ['error_after_create', 1],
  ] as const);
  switch (kind) {
    case 'create 5xx':
      return [kind, { method: 'POST', path: CREATE, action: 'error', status: rng.pick([500, 502, 503, 504]), times: rng.int(1, 3) }];
    case 'create 429':
      return [kind, { method: 'POST', path: CREATE, action: 'error', status: 429, code: 0, times: rng.int(1, 2) }];
    case 'create timeout':
      return [kind, { method: 'POST', path: CREATE, action: 'delay', ms: past(), times: rng.int(1, 2) }];
    case 'drop_after_create':
      return [kind, { method: 'POST', path: CREATE, action: 'drop_after_create', times: rng.int(1, 2) }];
    case 'delay_after_create':
      return [kind, { method: 'POST', path: CREATE, action: 'delay_after_create', ms: rng.int(200, 2_500), times: rng.int(1, 2) }];
    case 'error_after_create':
      return [kind, { method: 'POST', path: CREATE, action: 'error_after_create', status: rng.pick([500, 503]), times: 1 }];
  }
}

/**
 * The two deployments' processes as one list for the schedule's kills (startChaos takes one fleet):
 * member i is A's for i < A's size, B's after. Only killAndRestart is used.
 */
class FleetPair extends Fleet {
  constructor(
    private readonly a: Fleet,
    private readonly b: Fleet,
    log: (line: string) => void,
    pidFile: string,
    t0: number,
  ) {
    super([], log, pidFile, t0);
  }
  override get size(): number {
    return this.a.size + this.b.size;
  }
  override killAndRestart(index: number): Promise<string | undefined> {
    return index < this.a.size ? this.a.killAndRestart(index) : this.b.killAndRestart(index - this.a.size);
  }
}

interface Deployment {
  name: 'a' | 'b';
  botId: string;
  env: Record<string, string>;
  databaseUrl: string;
  bridgeToken: string;
  fleet: Fleet;
}

export async function runHandoffPhase(c: PhaseContext): Promise<PhaseResult> {
  const rng = new Rng(c.seed, PHASE);
  const t0 = Date.now();
  const stamp = () => `[${PHASE} ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`;
  // PostgreSQL's outages, from the kit's own lines: a receipt lost then is explained by them.
  const outages: { from: number; until: number }[] = [];
  const log = (line: string) => {
    if (line.startsWith('PostgreSQL: stop')) outages.push({ from: Date.now(), until: Infinity });
    const last = outages.at(-1);
    if (line === 'PostgreSQL: up again' && last !== undefined) last.until = Date.now();
    c.log(`${stamp()} ${line}`);
  };
  const per = Math.max(2, Math.ceil(c.processes / 2));
  const senders = Math.max(2, c.connectors);
  log(`phase ${PHASE}: bots A and B, ${per} Herald processes each, ${senders} sending agents (half each way), ${c.durationS}s of chaos`);

  const sandbox = await new DiscordSandbox({ routeLimit: ROUTE_LIMIT }).start();
  const helper = sandbox.addBot('helper');
  const botA = sandbox.bot.id;
  const botB = helper.user.id;
  // A thread, announced to both bots when their gateways connect.
  const thread = sandbox.createThread(SANDBOX_IDS.channels.ops, 'handoff chaos');
  const pidFileB = path.join(c.workDir, `${PHASE}-b.pids`);
  const stopWatchdogB = startWatchdog(pidFileB, path.join(c.workDir, `${PHASE}-b-watch`));
  const deployments: Deployment[] = [];
  const adminTokens = new Map<string, string>();
  const aborted = () => c.signal?.aborted === true;
  const onAbort = () => void Promise.all(deployments.map((d) => d.fleet.stopAll()));
  c.signal?.addEventListener('abort', onAbort);
  try {
    for (const [name, botId, token, trusts] of [
      ['a', botA, sandbox.botToken, botB],
      ['b', botB, helper.token, botA],
    ] as const) {
      const { databaseUrl, dataDir } = await preparePhaseDatabase(c, `${PHASE}-${name}`);
      const bridgeToken = newToken();
      const adminToken = newToken();
      adminTokens.set(name, adminToken);
      const env = heraldEnv(
        { sandbox, db: { databaseUrl, dataDir, drop: async () => undefined }, bridgeToken, adminToken },
        // Receipts are limited to 10 per source bot a minute by default: the phase sends more, and counts every one.
        { HOST: '127.0.0.1', LOG_LEVEL: 'info', ...HERALD_TIMINGS, DISCORD_TOKEN: token, HERALD_TRUSTED_BOT_IDS: trusts, HERALD_HANDOFF_RATE_LIMIT: '100000' },
      );
      const specs: MemberSpec[] = memberSpecs(per, env).map((s) => ({ ...s, name: `${name}/${s.name}` }));
      const fleet = new Fleet(specs, log, name === 'a' ? c.pidFile : pidFileB, t0);
      deployments.push({ name, botId, env, databaseUrl, bridgeToken, fleet });
    }
    const [a, b] = deployments as [Deployment, Deployment];
    log(`starting ${[...deployments].map((d) => `${d.name}: ${d.fleet.size} processes`).join(', ')}`);
    await Promise.all(deployments.map((d) => d.fleet.startAll()));
    c.signal?.throwIfAborted();
    await waitFor(() => sandbox.gatewaySessions >= 2, 'both bots on the gateway', 60_000);
    // A handoff goes only to a mapped destination's channel (or a thread under one): each bot maps the four.
    for (const d of deployments) {
      const [url] = d.fleet.serveUrls();
      for (const [destination, channelId] of Object.entries(SANDBOX_IDS.channels)) {
        const res = await fetch(`${url}/admin/destinations/${SANDBOX_IDS.guild}/${destination}`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${adminTokens.get(d.name) ?? ''}`, 'content-type': 'application/json' },
          body: JSON.stringify({ channel_id: channelId }),
        });
        if (res.status !== 200) throw new Error(`mapping ${destination} on ${d.name}: ${res.status} ${await res.text()}`);
      }
    }
    const setupMs = Date.now() - t0;
    log(`ready in ${(setupMs / 1000).toFixed(1)}s: A ${botA}, B ${botB}, thread ${thread.id} in #ops`);

    const side = (d: Deployment): BotSide => ({ name: d.name, botId: d.botId, bridgeToken: d.bridgeToken, servers: () => d.fleet.serveUrls() });
    const ledger = new Map<string, SentHandoffTrack>();
    const reads = new Map<string, ReadItem>();
    const stats = newAgentStats();
    const ctx: AgentContext = { t0, ledger, reads, stats, log, channels: CHANNELS, threads: [thread.id], maxFailedReposts: 2 };
    const agents = rng.fork('agents');
    const sending = Array.from({ length: senders }, (_, i) => (i % 2 === 0 ? new SendingAgent(i, agents, side(a), side(b), ctx) : new SendingAgent(i, agents, side(b), side(a), ctx)));
    const receiving = { a: new ReceivingAgent(agents, side(a), ctx), b: new ReceivingAgent(agents, side(b), ctx) };
    let acting = true;
    let following = true;
    const acts = sending.map((s) => s.act(() => acting && !aborted()));
    const follows = sending.map((s) => s.followUp(() => following && !aborted()));
    const readers = Object.values(receiving).map((r) => r.run(() => following && !aborted()));
    const chaosStart = Date.now();
    const pair = new FleetPair(a.fleet, b.fleet, log, c.pidFile, t0);
    const schedule = makeSchedule(rng.fork('schedule'), c.durationS * 1000, pair.size, randomCreateFault);
    const receivedEvents = () => new Set([...reads.values()].map((r) => `${r.bot}:${r.item.event_id.toLowerCase()}`));
    const progress = setInterval(() => {
      const all = [...ledger.values()];
      log(`progress: ${all.length} handoffs (${all.filter((t) => t.last?.state === 'delivered').length} seen delivered), ${reads.size} inbox items read, ${deployments.map((d) => `${d.name}: ${d.fleet.serveUrls().length} serve up`).join(', ')}, ${sandbox.gatewaySessions} gateway sessions`);
    }, 10_000);
    try {
      const chaos = startChaos(c, pair, schedule, log, (fault) => sandbox.inject(fault));
      const { pg: pgState, faultCounts } = chaos;
      await sleepWhile(c.durationS * 1000, () => !aborted());
      acting = false;
      const stopping = chaos.stop();
      await Promise.all(acts);
      await stopping;
      c.signal?.throwIfAborted();
      const chaosMs = Date.now() - chaosStart;
      const kills = a.fleet.kills + b.fleet.kills;
      log(`chaos over: ${ledger.size} handoffs, ${kills} kills, ${pgState.restarts} PostgreSQL restarts, ${Object.values(faultCounts).reduce((x, y) => x + y, 0)} faults`);
      sandbox.clearFaults();
      const settlingFrom = Date.now();
      log('settling: faults cleared, restarting every Herald process of both bots');
      await Promise.all(deployments.map((d) => d.fleet.restartAll()));
      await waitFor(() => sandbox.gatewaySessions >= 2, 'both bots on the gateway again', 60_000).catch(() => log('  both gateways not back within 60 s'));
      const settleFrom = Date.now();
      // Open: not settled by its sender, or delivered and not yet read at the other bot (for a while).
      const open = () => {
        const got = receivedEvents();
        return [...ledger.values()].filter((t) => {
          if (!SendingAgent.settled(t)) return true;
          if (t.last?.state !== 'delivered' || t.eventId === undefined) return false;
          const receiver = t.direction === 'a-to-b' ? 'b' : 'a';
          return !got.has(`${receiver}:${t.eventId.toLowerCase()}`) && Date.now() - Math.max(t.deliveredSeenAt ?? 0, settleFrom) < RECEIPT_GRACE_MS;
        });
      };
      const describeOpen = () => {
        const by: Record<string, number> = {};
        for (const t of open()) {
          const key = SendingAgent.settled(t) ? 'delivered, not yet in the inbox' : (t.last?.state ?? (t.accepted ? 'accepted' : 'unacknowledged'));
          by[key] = (by[key] ?? 0) + 1;
        }
        return Object.entries(by)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ');
      };
      const { settled, settleMs } = await settle(c, () => open().length, describeOpen, log);
      following = false;
      await Promise.all([...follows, ...readers]);
      c.signal?.throwIfAborted();

      // The verdict, from what is left: Discord's messages, each bridge's answers, the rows.
      const verifyStart = Date.now();
      await Promise.all(deployments.map((d) => d.fleet.stopAll()));
      const messages: SandboxMessage[] = sandbox.allMessages().map((m) => ({ ...m }));
      const finals = new Map<string, FinalHandoff>();
      const rows = new Map<string, Record<string, unknown>>();
      const inboxRows: { a: Record<string, unknown>[]; b: Record<string, unknown>[] } = { a: [], b: [] };
      for (const d of deployments) {
        const mine = [...ledger.values()].filter((t) => t.sourceBotId === d.botId).map((t) => t.requestId);
        await readFromApiOnly(d.env, async (url) => {
          for (const [id, f] of await finalHandoffs(url, d.bridgeToken, mine)) finals.set(id, f);
          // What is still in the inbox, unread or unacknowledged: the agent reads it now.
          for (const item of await listInbox(url, d.bridgeToken)) receiving[d.name].take(item);
        });
        const byDelivery = await deliveryRows(d.databaseUrl);
        for (const id of mine) {
          const row = byDelivery.get(handoffDeliveryId(id));
          if (row !== undefined) rows.set(id, row);
        }
        inboxRows[d.name] = await selectAll(d.databaseUrl, 'select id::text, event_id, source_bot_id, handoff_message_id, received_at, acknowledged_at from handoff_inbox order by id');
      }
      const byName = { a, b };
      const verdict = verifyHandoffs({
        sent: [...ledger.values()],
        finals,
        messages,
        reads: [...reads.values()],
        inboxRows,
        bots: { a: botA, b: botB },
        rows,
        senderLog: (t) => logLines(t.direction === 'a-to-b' ? a.fleet : b.fleet, [handoffDeliveryId(t.requestId)]),
        receiptStory: (receiver, message) => receiptStory(byName[receiver].fleet, t0, outages, message, settlingFrom),
      });
      const verifyMs = Date.now() - verifyStart;
      const sandboxRequests = countSandboxRequests(sandbox.requests);
      const { counts, violations } = verdict;
      const total = counts.duplicates + counts.lost + counts.stuck + counts.misattributed + counts.failedButSent + counts.orphans;
      const gaps = deployments.map((d) => `${d.name} ${gatewayGaps(d.fleet, t0, chaosStart, chaosStart + chaosMs)}`);
      const result: PhaseResult = {
        phase: PHASE,
        counts,
        violationCount: total,
        violations,
        undecided: [],
        chaos: {
          kills,
          pgRestarts: pgState.restarts,
          faults: faultCounts,
          crashes: [...a.fleet.crashes, ...b.fleet.crashes],
          startFailures: a.fleet.startFailures + b.fleet.startFailures,
          sandboxRequests,
        },
        connectors: {
          posts: stats.posts,
          accepted: stats.accepted,
          reposts: stats.reposts,
          blindReposts: stats.blindReposts,
          gets: stats.gets,
          networkErrors: stats.networkErrors,
          serverErrors: stats.serverErrors,
          protocolErrors: stats.protocolErrors,
        },
        settled,
        timings: { setupMs, chaosMs, settleMs, verifyMs },
        config: { sandboxNonceWindowMs: 5 * 60_000, heraldNonceWindowMs: undefined, env: { ...HERALD_TIMINGS, HERALD_HANDOFF_RATE_LIMIT: '100000' } },
        notes: [
          ...verdict.kindLines,
          ...verdict.notes,
          `receiving agents: ${stats.waits} waits for the next handoff, ${stats.acks} acknowledgements; kills: a ${a.fleet.kills}, b ${b.fleet.kills}`,
          `gateway not connected during the chaos (receipts cannot happen then): ${gaps.join('; ')}`,
        ],
      };
      log(`verdict: ${total === 0 ? 'no violations' : `${total} VIOLATIONS`}`);
      return result;
    } finally {
      clearInterval(progress);
      acting = false;
      following = false;
    }
  } finally {
    c.signal?.removeEventListener('abort', onAbort);
    for (const d of deployments) d.fleet.halt();
    await Promise.all(deployments.map((d) => d.fleet.stopAll()));
    stopWatchdogB();
    await sandbox.close();
  }
}

/** GET every handoff a bot sent from an API-only Herald of it (no dispatcher: nothing changes while we look). */
async function finalHandoffs(url: string, token: string, ids: string[]): Promise<Map<string, FinalHandoff>> {
  return readFinals(url, token, ids, (id) => `/mcp/handoffs/${id}`, (body) => ({ status: 200, handoff: body as SentJson }));
}

/** The whole unacknowledged inbox, page by page (GET /mcp/handoffs/inbox). */
async function listInbox(url: string, token: string): Promise<InboxJson[]> {
  const out: InboxJson[] = [];
  let after = '0';
  for (;;) {
    const res = await fetch(`${url}/mcp/handoffs/inbox?limit=100&after=${after}`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) });
    if (res.status !== 200) throw new Error(`GET /mcp/handoffs/inbox: ${res.status} ${await res.text()}`);
    const page = (await res.json()) as { items: InboxJson[]; next_cursor: string | null };
    out.push(...page.items);
    if (page.next_cursor === null || page.items.length === 0) return out;
    after = page.next_cursor;
  }
}

async function selectAll(databaseUrl: string, query: string): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return JSON.parse(JSON.stringify((await client.query<Record<string, unknown>>(query)).rows)) as Record<string, unknown>[];
  } finally {
    await client.end();
  }
}

/**
 * When (epoch ms) each incarnation of the bot's gateway holder had its gateway: from its "connecting"
 * line (messages may come from READY on, before "gateway connected" is logged after the slash
 * commands are registered), to its end. So a "no gateway" verdict is never a guess.
 */
function gatewayUp(fleet: Fleet, t0: number): { from: number; ready: number; until: number; who: string; killed: boolean }[] {
  const out: { from: number; ready: number; until: number; who: string; killed: boolean }[] = [];
  const timeOf = (line: string | undefined) => (line === undefined ? undefined : Number(/"time":([0-9]+)/.exec(line)?.[1] ?? 0));
  for (const inc of fleet.incarnations) {
    // Every serve process may hold the gateway (by its lease); one that never held it never connected.
    if (!inc.member.includes('serve')) continue;
    const lines = inc.output().split('\n');
    const from = timeOf(lines.find((l) => l.includes('"msg":"connecting to the Discord gateway"')));
    if (from === undefined) continue;
    const until = inc.endedAt !== undefined ? t0 + inc.endedAt : Infinity;
    const ready = timeOf(lines.find((l) => l.includes('"msg":"gateway connected'))) ?? until;
    out.push({ from, ready, until, who: `${inc.member}#${inc.pid ?? '-'}`, killed: inc.end?.killed === true });
  }
  return out;
}

/** How long the bot had no gateway between `from` and `until` (epoch ms): how often, the longest, in all. */
function gatewayGaps(fleet: Fleet, t0: number, from: number, until: number): string {
  const up = gatewayUp(fleet, t0).sort((x, y) => x.from - y.from);
  const gaps: number[] = [];
  let at = from;
  for (const u of up) {
    if (u.until < at) continue;
    if (u.from > at) gaps.push(Math.min(u.from, until) - at);
    at = Math.max(at, u.until);
    if (at >= until) break;
  }
  if (at < until) gaps.push(until - at);
  const real = gaps.filter((g) => g > 0);
  return `${real.length} gaps, longest ${((Math.max(0, ...real)) / 1000).toFixed(1)}s, ${(real.reduce((x, y) => x + y, 0) / 1000).toFixed(1)}s in all`;
}

/** Why the receiving bot did not take a handoff message in: its gateway, PostgreSQL, its own words. */
function receiptStory(fleet: Fleet, t0: number, outages: { from: number; until: number }[], message: SandboxMessage, settlingFrom: number): ReceiptStory {
  const at = Date.parse(message.timestamp);
  const up = gatewayUp(fleet, t0);
  const holder = up.find((u) => u.from <= at && at <= u.until);
  const lines: string[] = [];
  for (const inc of fleet.incarnations) {
    for (const line of inc.output().split('\n')) {
      if (!line.includes(`"message_id":"${message.id}"`)) continue;
      lines.push(`${inc.member}#${inc.pid ?? '-'} ${line.length > 400 ? `${line.slice(0, 400)}…` : line}`);
    }
  }
  // The gateway holders around that moment.
  for (const u of up) if (u.until >= at - 10_000 && u.from <= at + 10_000) lines.push(`${u.who} gateway from ${new Date(u.from).toISOString()} (connecting; ready ${Number.isFinite(u.ready) ? new Date(u.ready).toISOString() : 'never'}) until ${Number.isFinite(u.until) ? new Date(u.until).toISOString() : 'the end'}`);
  lines.push(`message posted ${message.timestamp}`);
  // Killed moments after the message came: taking it in (validation, then one transaction) did not commit.
  const killedSoon = holder !== undefined && holder.killed && holder.until - at < 2_000;
  if (killedSoon) lines.push(`${holder.who} SIGKILLed ${holder.until - at} ms after it was posted`);
  const pgDown = outages.some((o) => o.from <= at && at <= o.until + 2_000);
  const said = lines.find((l) => /handoff (refused|could not be taken in|accepted)/.test(l));
  let cause: string;
  if (holder === undefined) cause = 'the receiving bot had no gateway connected when it was posted';
  // Between "connecting" and "gateway connected" (logged once the slash commands are registered, after READY).
  else if (at < holder.ready && said === undefined) cause = "the receiving bot's gateway was still connecting when it was posted";
  else if (killedSoon && said === undefined) cause = "the receiving bot's gateway holder was SIGKILLed while taking it in";
  else if (said?.includes('handoff accepted') === true) cause = 'the receiving bot logged it accepted, yet its inbox never showed it';
  else if (said?.includes('handoff refused') === true) cause = `the receiving bot refused it (${/"reason":"([a-z_]+)"/.exec(said)?.[1] ?? '?'})`;
  else if (said !== undefined || pgDown) cause = `the receiving bot could not take it in${pgDown ? ' (PostgreSQL down)' : ''}`;
  else cause = `unexplained (gateway held by ${holder.who})`;
  // Settling restarts every process of both bots: one bot's dispatcher may post before the other's gateway is back.
  return { cause: at >= settlingFrom ? `${cause} (while settling)` : cause, lines };
}
