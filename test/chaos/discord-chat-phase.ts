import pg from 'pg';
import { DiscordSandbox, SANDBOX_IDS, type SandboxMessage } from '../../src/platforms/discord/sandbox/sandbox.js';
import { heraldEnv, newToken } from '../support/herald.js';
import { waitFor } from '../support/wait.js';
import { createTimes, deliveryRows, HERALD_TIMINGS, logLines, makeSchedule, sleepWhile, type PhaseContext, type PhaseResult } from './campaign.js';
import { ChatAgent, newChatStats, type ChatLine, type ChatSendJson, type CommandAsk, type SlashAsk } from './discord-chat-connector.js';
import { verifyDiscordChat, type ChatFinal } from './discord-chat-verify.js';
import { Fleet, type MemberSpec } from './fleet.js';
import { countSandboxRequests, preparePhaseDatabase, readFinals, readFromApiOnly, settle, startChaos } from './phase-kit.js';
import { Rng } from './prng.js';
import { TakeoverWatch, takeoverNotes } from './takeover.js';

/**
 * The discord-chat phase of the chaos campaign: real `herald serve`/`herald dispatch` processes
 * (SIGKILLed and restarted, PostgreSQL stopped hard), every `serve` with the gateway on so the
 * `discord:gateway` lease alone decides which one holds the session, and the sandbox Discord's
 * faults on the campaign's schedule. Agents send chat lines (`POST /mcp/chat/messages` on
 * Discord) under several senders, and execute commands people asked for with `responseMode:
 * discord`; people invoke slash commands through the gateway. The verdict: one message per chat
 * line and per command reply, in the right channel, under the right sender, nothing stuck
 * (discord-chat-verify.ts). Measured too: how long after the holder's SIGKILL another process
 * holds the lease, and the sandbox sees a new gateway session.
 */

const PHASE = 'discord-chat' as const;
/** The lease of the gateway session: short, so a handover fits between two kills (default 8 s). */
const SINGLETON_TTL_MS = '3000';
/**
 * Discord's global limit (50 requests a second) and the sandbox's default per route. Not the 5 a
 * second per route of the other phases: a chat send names its channel, and Herald looks the name
 * up in the guild's channel list (GET /guilds/{id}/channels) on every send and every proof, so one
 * route that small would throttle every chat line of every channel at once.
 */
const ROUTE_LIMIT = { limit: 50, windowMs: 1_000 };
const GLOBAL_LIMIT = { limit: 50, windowMs: 1_000 };
/** How often the sandbox's gateway sessions are counted. */
const SESSIONS_EVERY_MS = 50;

/** Half the processes (rounded up) serve, every one of them with the gateway on (the lease decides); the rest dispatch. */
export function gatewayMemberSpecs(n: number, env: Record<string, string>): MemberSpec[] {
  const serves = Math.max(1, Math.ceil(n / 2));
  return Array.from({ length: Math.max(1, n) }, (_, i) =>
    i < serves ? { name: `serve-${i + 1}`, command: 'serve' as const, env: { ...env, HERALD_GATEWAY: 'on' } } : { name: `dispatch-${i - serves + 1}`, command: 'dispatch' as const, env: { ...env, HERALD_GATEWAY: 'off' } },
  );
}

export async function runDiscordChatPhase(c: PhaseContext): Promise<PhaseResult> {
  const rng = new Rng(c.seed, PHASE);
  const t0 = Date.now();
  const stamp = () => `[${PHASE} ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`;
  const log = (line: string) => c.log(`${stamp()} ${line}`);
  log(`phase ${PHASE}: ${c.processes} Herald processes (every serve with the gateway on), ${c.connectors} agents, ${c.durationS}s of chaos; chat lines and command replies on Discord`);

  const sandbox = await new DiscordSandbox({ routeLimit: ROUTE_LIMIT, globalLimit: GLOBAL_LIMIT, mediaMessages: 0 }).start();
  let fleet: Fleet | undefined;
  let watch: GatewaySessions | undefined;
  let takeoverWatch: TakeoverWatch | undefined;
  const aborted = () => c.signal?.aborted === true;
  const onAbort = () => void fleet?.stopAll();
  c.signal?.addEventListener('abort', onAbort);
  try {
    const { databaseUrl, dataDir } = await preparePhaseDatabase(c, PHASE);
    const bridgeToken = newToken();
    const adminToken = newToken();
    const extra = {
      ...HERALD_TIMINGS,
      HERALD_SINGLETON_TTL_MS: SINGLETON_TTL_MS,
      HERALD_DISCORD_CHAT_GUILD: SANDBOX_IDS.guild,
      HERALD_COMMAND_EXECUTION_ENABLED: 'true',
      HERALD_COMMAND_TIMEOUT_MS: '5000',
    };
    const env = heraldEnv({ sandbox, db: { databaseUrl, dataDir, drop: async () => undefined }, bridgeToken, adminToken }, { HOST: '127.0.0.1', LOG_LEVEL: 'info', ...extra });

    const specs = gatewayMemberSpecs(c.processes, env);
    fleet = new Fleet(specs, log, c.pidFile, t0);
    const f = fleet;
    log(`starting ${specs.map((s) => s.name).join(', ')}`);
    await fleet.startAll();
    c.signal?.throwIfAborted();
    await waitFor(() => sandbox.commands.length > 0 && sandbox.gatewaySessions > 0, 'a gateway session and the slash commands', 60_000);
    const setupMs = Date.now() - t0;
    log(`ready in ${(setupMs / 1000).toFixed(1)}s: ${sandbox.gatewaySessions} gateway session`);

    const w = new GatewaySessions(f, sandbox, t0);
    watch = w;
    const takeovers = new TakeoverWatch(databaseUrl, f, t0, () => sandbox.gatewaySessions);
    takeoverWatch = takeovers;
    const lines = new Map<string, ChatLine>();
    const asks = new Map<string, CommandAsk>();
    const slashes: SlashAsk[] = [];
    const stats = newChatStats();
    const ctx = { t0, bridgeToken, sandbox, servers: () => f.serveUrls(), lines, asks, slashes, stats, log };
    const agents = Array.from({ length: c.connectors }, (_, i) => new ChatAgent(i, rng.fork('agents'), ctx));
    let acting = true;
    let following = true;
    const acts = agents.map((a) => a.act(() => acting && !aborted()));
    const follows = agents.map((a) => a.followUp(() => following && !aborted()));
    const chaosStart = Date.now() - t0;
    // The campaign's schedule: kills, PostgreSQL outages, and Discord's faults (campaign.ts's randomFault).
    const schedule = makeSchedule(rng.fork('schedule'), c.durationS * 1000, c.processes);
    const pgOutages: { from: number; until: number }[] = [];
    const chaosLog = (line: string) => {
      if (line.startsWith('PostgreSQL: stop')) pgOutages.push({ from: Date.now() - t0, until: Number.POSITIVE_INFINITY });
      if (line.startsWith('PostgreSQL: up again')) {
        const last = pgOutages.at(-1);
        if (last !== undefined) last.until = Date.now() - t0;
      }
      log(line);
    };
    const progress = setInterval(() => log(progressLine(lines, asks, slashes, sandbox, f)), 10_000);
    try {
      const chaos = startChaos(c, f, schedule, chaosLog, (fault) => sandbox.inject(fault));
      const { pg: pgState, faultCounts } = chaos;
      await sleepWhile(c.durationS * 1000, () => !aborted());
      acting = false;
      const stopping = chaos.stop();
      await Promise.all(acts);
      await stopping;
      c.signal?.throwIfAborted();
      const chaosEnd = Date.now() - t0;
      const chaosMs = chaosEnd - chaosStart;
      log(`chaos over: ${lines.size} chat lines, ${asks.size} commands executed, ${slashes.length} slash commands, ${f.kills} kills, ${pgState.restarts} PostgreSQL restarts, ${Object.values(faultCounts).reduce((a, b) => a + b, 0)} faults, ${f.crashes.length} crashes`);
      sandbox.clearFaults();
      takeovers.settling();
      log('settling: faults cleared, restarting every Herald process');
      await f.restartAll();
      const open = () => [...lines.values()].filter((l) => !ChatAgent.lineSettled(l)).length + [...asks.values()].filter((a) => !ChatAgent.askSettled(a)).length;
      const describeOpen = () => {
        const l = [...lines.values()].filter((x) => !ChatAgent.lineSettled(x)).length;
        const a = [...asks.values()].filter((x) => !ChatAgent.askSettled(x));
        return `${l} chat lines, ${a.filter((x) => x.result === undefined).length} commands without a final answer, ${a.filter((x) => x.result !== undefined).length} replies not sent`;
      };
      const { settled, settleMs } = await settle(c, open, describeOpen, log);
      following = false;
      await Promise.all(follows);
      c.signal?.throwIfAborted();

      const verifyStart = Date.now();
      w.stop();
      const handovers = await takeovers.stop(createTimes(sandbox));
      await f.stopAll();
      const messages: SandboxMessage[] = sandbox.allMessages().map((m) => ({ ...m }));
      const chatFinals = await readFromApiOnly(env, (url) => chatStates(url, bridgeToken, [...lines.keys()]));
      const rows = await deliveryRows(databaseUrl);
      const runs = await commandRuns(databaseUrl);
      const duplicateCallbacks = sandbox.requests.filter((r) => r.method === 'POST' && r.path.startsWith('/interactions/') && r.status === 400).length;
      const disrupted = (fromMs: number, untilMs: number) =>
        w.sessionDrops.some((at) => at >= fromMs - 500 && at <= untilMs) ||
        w.serveKills().some((at) => at >= fromMs - 1_000 && at <= untilMs) ||
        pgOutages.some((o) => o.from <= untilMs && o.until >= fromMs - 2_000);
      const verdict = verifyDiscordChat({
        lines: [...lines.values()],
        chatFinals,
        asks: [...asks.values()],
        rows,
        runs,
        slashes,
        duplicateCallbacks,
        disrupted,
        messages,
        botId: sandbox.bot.id,
        logsFor: (ids) => logLines(f, ids),
      });
      const verifyMs = Date.now() - verifyStart;
      const sandboxRequests = countSandboxRequests(sandbox.requests);
      const { chat, replies } = verdict;
      // After each new holder took the lease, how long until the sandbox saw a gateway session again.
      const sessionMs = handovers.handovers.map((h) => w.sessionUps.find((at) => at >= h.atS * 1000)).map((at, i) => (at === undefined ? undefined : Math.round(at - (handovers.handovers[i]?.atS ?? 0) * 1000)));
      const result: PhaseResult = {
        phase: PHASE,
        counts: verdict.counts,
        violationCount: verdict.counts.duplicates + verdict.counts.lost + verdict.counts.stuck + verdict.counts.misattributed + verdict.counts.failedButSent + verdict.counts.orphans,
        violations: verdict.violations,
        undecided: [],
        chaos: { kills: f.kills, pgRestarts: pgState.restarts, faults: faultCounts, crashes: f.crashes, startFailures: f.startFailures, sandboxRequests },
        connectors: { posts: stats.posts + stats.runs, accepted: 0, reposts: stats.reposts, blindReposts: stats.blindReposts, gets: stats.gets, networkErrors: stats.networkErrors, serverErrors: stats.serverErrors, protocolErrors: stats.protocolErrors },
        settled,
        timings: { setupMs, chaosMs, settleMs, verifyMs },
        config: { sandboxNonceWindowMs: 5 * 60_000, heraldNonceWindowMs: undefined, env: extra },
        notes: [
          `kind chat-discord: sent ${chat.sent}, duplicates ${chat.duplicates}, lost ${chat.lost}, stuck ${chat.stuck}, misattributed ${chat.misattributed}`,
          `kind command-reply: sent ${replies.sent + replies.slash}, duplicates ${replies.duplicates}, lost ${replies.lost}, stuck ${replies.stuck}, misattributed ${replies.misattributed}`,
          ...takeoverNotes(handovers),
          `gateway sessions: a new one ${sessionMs.map((ms) => ms ?? '-').join(', ') || '-'} ms after each new lease above; most at once: ${w.maxSessions} (HERALD_SINGLETON_TTL_MS ${SINGLETON_TTL_MS})`,
          `chat lines: ${chat.delivered} delivered, ${chat.failed} failed (failed-but-sent ${chat.failedButSent}), ${chat.unconfirmed} unconfirmed (allowed, evidence below; the table's unknown column), ${chat.pending} not final`,
          ...verdict.unconfirmedNotes.slice(0, 24).map((n) => (n.startsWith(' ') ? `  ${n}` : `  - ${n}`)),
          `command replies (responseMode discord): ${replies.sent} executes, ${replies.delivered} replies delivered, ${replies.refused} clear refusals (the table's failed column with failed chat lines), ${replies.failed} replies failed after their attempts (no message), ${replies.stuck} without a final answer or reply; failed-but-sent ${replies.failedButSent}`,
          ...verdict.refusedNotes.slice(0, 6).map((n) => `  - ${n}`),
          `slash commands through the gateway: ${replies.slash} invoked, ${replies.slashAnswered} answered, ${replies.slashUnanswered} unanswered (a clear failure for the person when the gateway moved; lost otherwise), ${replies.slashNotConnected} refused with no session; ${replies.duplicateCallbacks} second answers`,
        ],
      };
      log(`verdict: ${result.violationCount === 0 ? 'no violations' : `${result.violationCount} VIOLATIONS`}`);
      return result;
    } finally {
      clearInterval(progress);
      acting = false;
      following = false;
    }
  } finally {
    c.signal?.removeEventListener('abort', onAbort);
    watch?.stop();
    await takeoverWatch?.stop();
    fleet?.halt();
    await fleet?.stopAll();
    await sandbox.close();
  }
}

/**
 * Counts the sandbox's gateway sessions every 50 ms: when they dropped to none and came back, and
 * the most at once (the lease itself: takeover.ts). Times are ms since the phase began.
 */
class GatewaySessions {
  readonly sessionUps: number[] = [];
  readonly sessionDrops: number[] = [];
  maxSessions = 0;
  private lastSessions: number;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly fleet: Fleet,
    private readonly sandbox: DiscordSandbox,
    private readonly t0: number,
  ) {
    this.lastSessions = sandbox.gatewaySessions;
    this.timer = setInterval(() => this.countSessions(), SESSIONS_EVERY_MS);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private now(): number {
    return Date.now() - this.t0;
  }

  private countSessions(): void {
    const n = this.sandbox.gatewaySessions;
    this.maxSessions = Math.max(this.maxSessions, n);
    if (n === 0 && this.lastSessions > 0) this.sessionDrops.push(this.now());
    if (n > 0 && this.lastSessions === 0) this.sessionUps.push(this.now());
    this.lastSessions = n;
  }

  /** When `serve` processes were SIGKILLed by the campaign (ms since the phase began). */
  serveKills(): number[] {
    return this.fleet.incarnations.filter((inc) => inc.member.startsWith('serve') && inc.end?.killed === true && inc.endedAt !== undefined).map((inc) => inc.endedAt ?? 0);
  }

}

/** GET every chat send from an API-only Herald (no dispatcher: nothing changes while we look). */
async function chatStates(url: string, token: string, ids: string[]): Promise<Map<string, ChatFinal>> {
  return readFinals(url, token, ids, (id) => `/mcp/chat/messages/${id}`, (body) => ({ status: 200, send: body as ChatSendJson }));
}

/** The command_runs rows by idempotency key. */
async function commandRuns(databaseUrl: string): Promise<Map<string, Record<string, unknown>>> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<Record<string, unknown>>('select idempotency_key, status, created_at, expires_at from command_runs');
    return new Map(rows.map((r) => [String(r['idempotency_key']), JSON.parse(JSON.stringify(r)) as Record<string, unknown>]));
  } finally {
    await client.end();
  }
}

function progressLine(lines: Map<string, ChatLine>, asks: Map<string, CommandAsk>, slashes: SlashAsk[], sandbox: DiscordSandbox, fleet: Fleet): string {
  const all = [...lines.values()];
  const done = all.filter((l) => ChatAgent.lineSettled(l)).length;
  const answered = [...asks.values()].filter((a) => a.result !== undefined).length;
  return `progress: ${all.length} chat lines (${done} final), ${asks.size} commands (${answered} answered), ${slashes.length} slash commands, ${sandbox.allMessages().length} messages, ${sandbox.gatewaySessions} gateway sessions, ${fleet.kills} kills, ${fleet.crashes.length} crashes, ${fleet.serveUrls().length} serve up`;
}
