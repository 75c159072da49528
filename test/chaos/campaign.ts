import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { DiscordSandbox, SANDBOX_IDS, SANDBOX_MEMBER_IDS, type Fault, type SandboxMessage } from '../../src/platforms/discord/sandbox/sandbox.js';
import { POLICY_CLIENT_HEADER } from '../../src/infra/http/policy.middleware.js';
import { heraldEnv, newToken } from '../support/herald.js';
import { startPgCluster, type PgCluster } from '../support/pg-cluster.js';
import { waitFor } from '../support/wait.js';
import { Connector, newStats, REACTING_ACTIONS, type ConnectorStats, type StateJson, type Tracked } from './connector.js';
import { Fleet, startWatchdog, type Crash, type MemberSpec } from './fleet.js';
import { countSandboxRequests, preparePhaseDatabase, readFinals, readFromApiOnly, settle, startChaos, type ChaosRun } from './phase-kit.js';
import { kindLines } from './report.js';
import { TakeoverWatch, takeoverNotes } from './takeover.js';
import type { PhaseExtras } from './phase-extras.js';
import { pauseExtras } from './pause-phase.js';
import { partitionExtras } from './partition-phase.js';
import { StaleWatch } from './stale-watch.js';
import { runArchivePhase } from './archive-phase.js';
import { runSlackPhase } from './slack-phase.js';
import { runHandoffPhase } from './handoff-phase.js';
import { runDiscordChatPhase } from './discord-chat-phase.js';
import { runIrcChatPhase } from './irc-phase.js';
import { Rng } from './prng.js';
import { PHASES, type PhaseName } from './phases.js';
import { verify, violationTotal, type FinalState, type PhaseCounts, type Undecided, type Violation } from './verify.js';

/**
 * The chaos campaign: real `herald serve`/`herald dispatch` processes on a throwaway PostgreSQL
 * cluster, a sandbox Discord in this process that answers 5xx, 429, timeouts and "created, then the
 * answer lost", processes SIGKILLed and PostgreSQL stopped hard on a schedule drawn from one seed,
 * and simulated connectors retrying as real ones do. Then everything settles and every Discord
 * message is accounted for: exactly one per delivery.
 */

/**
 * Every phase and what runs it: Discord's deliveries twice (two nonce windows, here), then the
 * phases with their own sandboxes, faults and verdicts, each in its own file. (Called through
 * arrows: those files import this one.)
 */
const RUNNERS = {
  'default-window': (c: PhaseContext) => runPhase(c, 'default-window'),
  'short-window': (c: PhaseContext) => runPhase(c, 'short-window'),
  pauses: (c: PhaseContext) => runPhase(c, 'pauses', pauseExtras(c)),
  partitions: (c: PhaseContext) => runPhase(c, 'partitions', partitionExtras(c)),
  slack: (c: PhaseContext) => runSlackPhase(c),
  'slack-pauses': (c: PhaseContext) => runSlackPhase(c, 'slack-pauses'),
  'discord-chat': (c: PhaseContext) => runDiscordChatPhase(c),
  'irc-chat': (c: PhaseContext) => runIrcChatPhase(c),
  'irc-pauses': (c: PhaseContext) => runIrcChatPhase(c, 'irc-pauses'),
  handoffs: (c: PhaseContext) => runHandoffPhase(c),
  archive: (c: PhaseContext) => runArchivePhase(c),
} satisfies Record<PhaseName, (c: PhaseContext) => Promise<PhaseResult>>;

export { PHASES, type PhaseName };

export interface CampaignOptions {
  seed: number;
  /** Seconds of chaos per phase. */
  durationS: number;
  /** Herald processes per phase: half (rounded up) `serve`, the rest `dispatch`. */
  processes: number;
  connectors?: number;
  /** Upper bound on settling after the chaos, per phase. */
  settleS?: number;
  phases?: readonly PhaseName[];
  /** Short-window phase: the sandbox's nonce window and Herald's (HERALD_NONCE_WINDOW_MS). */
  shortWindow?: { sandboxMs: number; heraldMs: number };
  log?: (line: string) => void;
  signal?: AbortSignal;
  /** A throwaway cluster the caller started and stops (several campaigns share it); else one of the campaign's own. */
  cluster?: PgCluster;
}

export interface PhaseResult {
  phase: PhaseName;
  counts: PhaseCounts;
  violationCount: number;
  violations: Violation[];
  /** Deliveries rightly left `unknown` between twins in doubt (not violations), with their evidence. */
  undecided: Undecided[];
  chaos: {
    kills: number;
    pgRestarts: number;
    faults: Record<string, number>;
    crashes: Crash[];
    startFailures: number;
    sandboxRequests: Record<string, number>;
  };
  connectors: ConnectorStats;
  settled: boolean;
  timings: { setupMs: number; chaosMs: number; settleMs: number; verifyMs: number };
  config: { sandboxNonceWindowMs: number; heraldNonceWindowMs: number | undefined; env: Record<string, string> };
  /** Lines of the phase's own to print under its details (the Slack phase: its calls and unknowns). */
  notes?: string[];
}

export interface CampaignResult {
  seed: number;
  options: { durationS: number; processes: number; connectors: number; settleS: number; phases: readonly PhaseName[] };
  phases: PhaseResult[];
  violations: number;
  elapsedMs: number;
}

/** Herald's timings for the campaign: leases, timeouts and retries in seconds, not minutes. */
export const HERALD_TIMINGS = {
  HERALD_LEASE_MS: '3000',
  HERALD_DISCORD_TIMEOUT_MS: '1000',
  HERALD_RETRY_BASE_MS: '50',
  HERALD_POLL_MS: '200',
  HERALD_MAX_ATTEMPTS: '4',
  HERALD_SHUTDOWN_GRACE_MS: '1000',
};
const DISCORD_TIMEOUT_MS = Number(HERALD_TIMINGS.HERALD_DISCORD_TIMEOUT_MS);
/**
 * Short window: Herald trusts the nonce for heraldMs after an attempt began, and one attempt may
 * keep sending for up to HERALD_LEASE_MS; Discord (the sandbox) must remember it at least that
 * long, or a resend Herald rightly believed safe would duplicate. 1 s + 3 s lease ≤ 4 s.
 */
const DEFAULT_SHORT_WINDOW = { sandboxMs: 4_000, heraldMs: 1_000 };
const ROUTE_LIMIT = { limit: 5, windowMs: 1_000 };
const GLOBAL_LIMIT = { limit: 30, windowMs: 1_000 };
const POSTABLE_CHANNELS: Record<string, string> = {
  alerts: SANDBOX_IDS.channels.alerts,
  deals: SANDBOX_IDS.channels.deals,
  digest: SANDBOX_IDS.channels.digest,
};

export async function runCampaign(options: CampaignOptions): Promise<CampaignResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const phases = options.phases ?? PHASES;
  const resolved = { durationS: options.durationS, processes: options.processes, connectors: options.connectors ?? 3, settleS: options.settleS ?? 40, phases };
  const started = Date.now();
  const workDir = await mkdtemp(path.join(tmpdir(), 'herald-chaos-'));
  const pidFile = path.join(workDir, 'pids');
  const stopWatchdog = startWatchdog(pidFile, workDir);
  let cluster: PgCluster | undefined;
  const results: PhaseResult[] = [];
  try {
    const given = options.cluster;
    if (given === undefined) {
      log(`starting a throwaway PostgreSQL cluster`);
      cluster = await startPgCluster();
      log(`  PostgreSQL on port ${cluster.port} (${cluster.dir})`);
    }
    for (const phase of phases) {
      options.signal?.throwIfAborted();
      const context = { ...resolved, seed: options.seed, cluster: given ?? (cluster as PgCluster), workDir, pidFile, log, signal: options.signal, shortWindow: options.shortWindow ?? DEFAULT_SHORT_WINDOW };
      results.push(await RUNNERS[phase](context));
    }
  } finally {
    await cluster?.destroy();
    stopWatchdog();
    await rm(workDir, { recursive: true, force: true });
  }
  return { seed: options.seed, options: resolved, phases: results, violations: results.reduce((n, p) => n + p.violationCount, 0), elapsedMs: Date.now() - started };
}

export interface PhaseContext {
  seed: number;
  durationS: number;
  processes: number;
  connectors: number;
  settleS: number;
  shortWindow: { sandboxMs: number; heraldMs: number };
  cluster: PgCluster;
  workDir: string;
  pidFile: string;
  log: (line: string) => void;
  signal: AbortSignal | undefined;
}

async function runPhase(c: PhaseContext, phase: 'default-window' | 'short-window' | 'pauses' | 'partitions', extras?: PhaseExtras): Promise<PhaseResult> {
  const rng = new Rng(c.seed, phase);
  const t0 = Date.now();
  const stamp = () => `[${phase} ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`;
  const log = (line: string) => c.log(`${stamp()} ${line}`);
  // The pauses and partitions run under the short window too: Discord's nonce cannot save Herald there.
  const short = phase !== 'default-window';
  const sandboxNonceWindowMs = short ? c.shortWindow.sandboxMs : 5 * 60_000;
  const heraldNonceWindowMs = short ? c.shortWindow.heraldMs : undefined;
  log(`phase ${phase}: ${c.processes} Herald processes, ${c.connectors} connectors, ${c.durationS}s of chaos; nonce window: Discord ${sandboxNonceWindowMs} ms, Herald ${heraldNonceWindowMs ?? 'default'} ms`);

  const sandbox = await new DiscordSandbox({ nonceWindowMs: sandboxNonceWindowMs, routeLimit: ROUTE_LIMIT, globalLimit: GLOBAL_LIMIT, ...extras?.sandbox }).start();
  let fleet: Fleet | undefined;
  const aborted = () => c.signal?.aborted === true;
  // Interrupted: end the processes now; the waits below notice and the finally cleans up.
  const onAbort = () => void fleet?.stopAll();
  c.signal?.addEventListener('abort', onAbort);
  try {
    const { databaseUrl, dataDir } = await preparePhaseDatabase(c, phase);
    const bridgeToken = newToken();
    const adminToken = newToken();
    // The default window's Herald is two Discord bots (docs/guides/identities.md): the odd-numbered
    // connectors' agent is bound to the bot `ops`, so every message of theirs must come from it.
    const ops = phase === 'default-window' ? await twoBots(sandbox, path.join(c.workDir, `${phase}-agents.yaml`)) : undefined;
    const env = heraldEnv(
      { sandbox, db: { databaseUrl, dataDir, drop: async () => undefined }, bridgeToken, adminToken },
      { HOST: '127.0.0.1', LOG_LEVEL: 'info', ...HERALD_TIMINGS, ...(heraldNonceWindowMs !== undefined ? { HERALD_NONCE_WINDOW_MS: String(heraldNonceWindowMs) } : {}), ...ops?.env },
    );

    const specs = memberSpecs(c.processes, env);
    await extras?.prepare({ sandbox, databaseUrl, specs });
    fleet = new Fleet(specs, log, c.pidFile, t0);
    const f = fleet;
    log(`starting ${specs.map((s) => s.name).join(', ')}`);
    await fleet.startAll();
    c.signal?.throwIfAborted();

    // The user the DMs go to registers through the gateway, as in Discord.
    await waitFor(() => sandbox.commands.length > 0 && sandbox.gatewaySessions > 0, 'the gateway session and slash commands', 60_000);
    const registered = await sandbox.invoke({ userId: SANDBOX_IDS.user, guildId: SANDBOX_IDS.guild, command: 'agent', subcommand: 'register' });
    if (!/Registered|Already registered/.test(registered.data?.content ?? '')) throw new Error(`/agent register answered ${JSON.stringify(registered)}`);
    // With two bots, the user registers with the ops bot too (on it): its agent's DMs reach only people registered with it.
    if (ops !== undefined) {
      const opsId = ops.botId;
      await waitFor(() => sandbox.commandsOf(opsId).length > 0, 'the ops bot’s /agent (its gateway session up)', 60_000);
      const withOps = await sandbox.invoke({ userId: SANDBOX_IDS.user, guildId: SANDBOX_IDS.guild, command: 'agent', subcommand: 'register', botId: opsId });
      if (!/Registered|Already registered/.test(withOps.data?.content ?? '')) throw new Error(`/agent register on the ops bot answered ${JSON.stringify(withOps)}`);
    }
    for (const [destination, channelId] of Object.entries(POSTABLE_CHANNELS)) await mapDestination(f, adminToken, destination, channelId);
    const setupMs = Date.now() - t0;
    log(`ready in ${(setupMs / 1000).toFixed(1)}s: user registered, alerts/deals/digest mapped (ops left unmapped on purpose)`);

    // The chaos.
    const ledger = new Map<string, Tracked>();
    const stats = newStats();
    const ctx = { phase, t0, bridgeToken, servers: () => f.serveUrls(), ledger, stats, log, maxFailedReposts: 2, ...(phase === 'default-window' ? { actions: REACTING_ACTIONS } : {}), ...(ops !== undefined ? { agentOf: ops.agentOf } : {}) };
    const connectors = Array.from({ length: c.connectors }, (_, i) => new Connector(i, rng.fork('connectors'), ctx));
    let acting = true;
    let following = true;
    const acts = connectors.map((k) => k.act(() => acting && !aborted()));
    const follows = connectors.map((k) => k.followUp(() => following && !aborted()));
    const chaosStart = Date.now();
    const schedule = makeSchedule(rng.fork('schedule'), c.durationS * 1000, c.processes).filter((e) => extras?.keep(e) ?? true);
    const takeovers = new TakeoverWatch(databaseUrl, f, t0, () => sandbox.gatewaySessions);
    const stale = new StaleWatch(databaseUrl);
    const progress = setInterval(() => log(progressLine(ledger, sandbox, f)), 10_000);
    let chaos: ChaosRun | undefined;
    try {
      chaos = startChaos(c, f, schedule, log, (fault) => sandbox.inject(fault));
      extras?.start({ fleet: f, sandbox, t0, log });
      const { pg, faultCounts } = chaos;
      await sleepWhile(c.durationS * 1000, () => !aborted());
      acting = false;
      const stopping = chaos.stop();
      await Promise.all(acts);
      // Settle: no more faults, PostgreSQL up, every process fresh, connectors re-POST as they would.
      await stopping;
      await extras?.drain(specs);
      c.signal?.throwIfAborted();
      const chaosMs = Date.now() - chaosStart;
      log(`chaos over: ${ledger.size} deliveries, ${f.kills} kills, ${pg.restarts} PostgreSQL restarts, ${Object.values(faultCounts).reduce((a, b) => a + b, 0)} faults, ${f.crashes.length} crashes`);
      sandbox.clearFaults();
      takeovers.settling();
      log('settling: faults cleared, restarting every Herald process');
      await f.restartAll();
      const open = () => [...ledger.values()].filter((t) => !Connector.settled(t));
      const { settled, settleMs } = await settle(c, () => open().length, () => summarizeOpen(open()), log);
      following = false;
      await Promise.all(follows);
      c.signal?.throwIfAborted();

      // The verdict, from what is left: Discord's messages, the bridge's answers, the rows.
      const verifyStart = Date.now();
      const handovers = await takeovers.stop(createTimes(sandbox));
      const staleRows = await stale.stop();
      await f.stopAll();
      const messages: SandboxMessage[] = sandbox.allMessages().map((m) => ({ ...m }));
      const dmChannels = [...sandbox.channels.values()].filter((ch) => ch.type === 1 && ch.recipients?.some((u) => u.id === SANDBOX_IDS.user)).map((ch) => ch.id);
      const agentOfId = (id: string) => ops?.agentOf(ledger.get(id)?.connector ?? 0) ?? {};
      const finals = await readFromApiOnly(env, (url) => finalStates(url, bridgeToken, [...ledger.keys()], agentOfId));
      const rows = await deliveryRows(databaseUrl);
      const { counts, violations, undecided } = verify({
        tracked: [...ledger.values()],
        finals,
        messages,
        deleted: [...sandbox.deleted],
        channels: { ...POSTABLE_CHANNELS },
        dmChannels,
        rows,
        staleRows,
        logsFor: (ids) => logLines(f, ids),
        gatewayLog: (fromMs, untilMs) => gatewayLines(f, t0, fromMs, untilMs),
        ...(ops !== undefined ? { authorOf: (t: Tracked) => (t.connector % 2 === 1 ? ops.botId : sandbox.bot.id) } : {}),
      });
      const verifyMs = Date.now() - verifyStart;
      const sandboxRequests = countSandboxRequests(sandbox.requests);
      const result: PhaseResult = {
        phase,
        counts,
        violationCount: violationTotal(counts),
        violations,
        undecided,
        chaos: { kills: f.kills, pgRestarts: pg.restarts, faults: faultCounts, crashes: f.crashes, startFailures: f.startFailures, sandboxRequests },
        connectors: stats,
        settled,
        timings: { setupMs, chaosMs, settleMs, verifyMs },
        config: { sandboxNonceWindowMs, heraldNonceWindowMs, env: { ...HERALD_TIMINGS, ...(heraldNonceWindowMs !== undefined ? { HERALD_NONCE_WINDOW_MS: String(heraldNonceWindowMs) } : {}) } },
        // Posts and DMs with files get their own lines (post-files, dm-files) beside reactions and deletes.
        notes: [...kindLines([...ledger.values()].map((t) => ({ ...t, kind: t.attachments !== undefined ? `${t.kind}-files` : t.kind })), violations), ...takeoverNotes(handovers), ...(extras?.notes(handovers) ?? []), ...(ops !== undefined ? [identitiesNote([...ledger.values()], messages, ops.botId)] : [])],
      };
      log(`verdict: ${result.violationCount === 0 ? 'no violations' : `${result.violationCount} VIOLATIONS`}`);
      return result;
    } finally {
      clearInterval(progress);
      acting = false;
      following = false;
      chaos?.halt();
      await takeovers.stop();
      await stale.stop();
    }
  } finally {
    c.signal?.removeEventListener('abort', onAbort);
    fleet?.halt();
    await fleet?.stopAll();
    await extras?.close();
    await sandbox.close();
  }
}

/**
 * Half the processes (rounded up) serve the API and would all hold the gateway: its lease lets one
 * at a time, and another takes over when the holder dies. The rest only dispatch.
 */
export function memberSpecs(n: number, env: Record<string, string>): MemberSpec[] {
  const serves = Math.max(1, Math.ceil(n / 2));
  return Array.from({ length: Math.max(1, n) }, (_, i) =>
    i < serves
      ? { name: `serve-${i + 1}`, command: 'serve' as const, env: { ...env, HERALD_GATEWAY: 'on' } }
      : { name: `dispatch-${i - serves + 1}`, command: 'dispatch' as const, env: { ...env, HERALD_GATEWAY: 'off' } },
  );
}

export type ScheduledEvent<F = Fault> = { at: number } & ({ what: 'kill'; member: number } | { what: 'pg'; downMs: number } | { what: 'fault'; label: string; fault: F });

/**
 * The whole phase's schedule, drawn from the seed before anything runs: kills, PostgreSQL outages,
 * and faults drawn by `draw` every `faultGapMs` (Discord's by default).
 */
export function makeSchedule<F = Fault>(rng: Rng, durationMs: number, members: number, draw: (rng: Rng) => [string, F] = randomFault as unknown as (rng: Rng) => [string, F], faultGapMs: readonly [number, number] = [400, 1_500]): ScheduledEvent<F>[] {
  const events: ScheduledEvent<F>[] = [];
  const kills = rng.fork('kills');
  for (let at = kills.float(1_500, 3_500); at < durationMs; at += kills.float(2_500, 6_000)) events.push({ at, what: 'kill', member: kills.int(0, members - 1) });
  const outages = rng.fork('postgres');
  const count = Math.max(1, Math.round(durationMs / 40_000));
  for (let k = 0; k < count; k++) {
    const slot = durationMs / count;
    events.push({ at: slot * k + slot * outages.float(0.25, 0.75), what: 'pg', downMs: outages.int(1_000, 3_000) });
  }
  const faults = rng.fork('faults');
  for (let at = faults.float(300, 1_000); at < durationMs; at += faults.float(faultGapMs[0], faultGapMs[1])) {
    const [label, fault] = draw(faults);
    events.push({ at, what: 'fault', label, fault });
  }
  return events.sort((a, b) => a.at - b.at);
}

const CREATE = '^/channels/[0-9]+/messages$';
const MESSAGE = '^/channels/[0-9]+/messages/[0-9]+$';

function randomFault(rng: Rng): [string, Fault] {
  const past = () => DISCORD_TIMEOUT_MS + rng.int(200, 1_500);
  const kind = rng.weighted([
    ['create 5xx', 3],
    ['create 429', 2],
    ['create timeout', 2],
    ['drop_after_create', 3],
    ['delay_after_create', 3],
    ['error_after_create', 1],
    ['edit 5xx', 1],
    ['edit timeout', 1],
    ['history 5xx', 1],
    ['open-dm timeout', 1],
  ] as const);
  switch (kind) {
    case 'create 5xx':
      return [kind, { method: 'POST', path: CREATE, action: 'error', status: rng.pick([500, 502, 503, 504]), times: rng.int(1, 4) }];
    case 'create 429':
      return [kind, { method: 'POST', path: CREATE, action: 'error', status: 429, code: 0, times: rng.int(1, 3) }];
    case 'create timeout':
      return [kind, { method: 'POST', path: CREATE, action: 'delay', ms: past(), times: rng.int(1, 3) }];
    case 'drop_after_create':
      return [kind, { method: 'POST', path: CREATE, action: 'drop_after_create', times: rng.int(1, 3) }];
    case 'delay_after_create':
      // Some answers come late but in time, some after Herald gave up on them.
      return [kind, { method: 'POST', path: CREATE, action: 'delay_after_create', ms: rng.int(200, 2_500), times: rng.int(1, 3) }];
    case 'error_after_create':
      return [kind, { method: 'POST', path: CREATE, action: 'error_after_create', status: rng.pick([500, 503]), times: 1 }];
    case 'edit 5xx':
      return [kind, { method: 'PATCH', path: MESSAGE, action: 'error', status: rng.pick([500, 502]), times: rng.int(1, 3) }];
    case 'edit timeout':
      return [kind, { method: 'PATCH', path: MESSAGE, action: 'delay', ms: past(), times: rng.int(1, 2) }];
    case 'history 5xx':
      return [kind, { method: 'GET', path: CREATE, action: 'error', status: 500, times: rng.int(1, 2) }];
    case 'open-dm timeout':
      return [kind, { method: 'POST', path: '^/users/@me/channels$', action: 'delay', ms: past(), times: 1 }];
  }
}

export async function runSchedule<F>(
  events: ScheduledEvent<F>[],
  start: number,
  running: () => boolean,
  act: { kill(member: number): Promise<void>; pg(downMs: number): Promise<void>; fault(label: string, fault: F): void },
): Promise<void> {
  const background: Promise<void>[] = [];
  let pgBusy: Promise<void> | undefined;
  for (const ev of events) {
    const wait = start + ev.at - Date.now();
    if (wait > 0 && !(await sleepWhile(wait, running))) break;
    if (!running()) break;
    if (ev.what === 'kill') background.push(act.kill(ev.member).catch(() => undefined));
    else if (ev.what === 'fault') act.fault(ev.label, ev.fault);
    else if (pgBusy === undefined) {
      const outage = act.pg(ev.downMs).finally(() => (pgBusy = undefined));
      pgBusy = outage;
      background.push(outage);
    }
  }
  await Promise.all(background);
}

export async function startPostgres(cluster: PgCluster, log: (line: string) => void): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await cluster.start();
      return;
    } catch (err) {
      if (attempt >= 20) throw err;
      log(`  pg_ctl start failed (${String(err).slice(0, 160)}); retrying`);
      await sleep(500);
    }
  }
}

export async function adminQueries(url: string, statements: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const s of statements) await client.query(s);
  } finally {
    await client.end();
  }
}

async function mapDestination(fleet: Fleet, adminToken: string, destination: string, channelId: string): Promise<void> {
  await waitFor(
    async () => {
      const url = fleet.serveUrls()[0];
      if (url === undefined) return false;
      const res = await fetch(`${url}/admin/destinations/${SANDBOX_IDS.guild}/${destination}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ channel_id: channelId }),
        signal: AbortSignal.timeout(5_000),
      });
      if (res.status !== 200) throw new Error(`PUT destination ${destination}: ${res.status} ${await res.text()}`);
      return true;
    },
    `mapping ${destination}`,
    30_000,
  );
}

/** GET every delivery from an API-only Herald (no dispatcher: nothing changes while we look). */
/** How many deliveries each agent made, and how many of the messages came from the ops bot: the line the report shows. */
function identitiesNote(tracked: readonly Tracked[], messages: readonly SandboxMessage[], opsBotId: string): string {
  const byOps = tracked.filter((t) => t.connector % 2 === 1).length;
  const fromOps = messages.filter((m) => m.author.id === opsBotId).length;
  return `identities: ${byOps} deliveries by the agent bound to ops (odd connectors), ${tracked.length - byOps} by the others; ${fromOps} of ${messages.length} messages from the ops bot; each checked against its agent's bot (misattributed otherwise)`;
}

/**
 * A second bot for the phase's Herald (`ops`, HERALD_DISCORD_IDENTITIES, a member of the guild as
 * Herald's bot is) and the policy binding the odd-numbered connectors' agent to it: its settings, the
 * bot's user id, and the headers each connector's requests name its agent with.
 */
async function twoBots(sandbox: DiscordSandbox, policyFile: string): Promise<{ env: Record<string, string>; botId: string; agentOf: (connector: number) => Record<string, string> }> {
  const bot = sandbox.addBot('herald-ops');
  sandbox.people.setMember(SANDBOX_IDS.guild, bot.user.id, [SANDBOX_MEMBER_IDS.heraldRole]);
  await writeFile(policyFile, 'clients:\n  agent-ops: { identity: ops }\n');
  return {
    env: { HERALD_DISCORD_IDENTITIES: 'ops=env:CHAOS_OPS_BOT_TOKEN', CHAOS_OPS_BOT_TOKEN: bot.token, HERALD_POLICY: policyFile },
    botId: bot.user.id,
    agentOf: (connector) => (connector % 2 === 1 ? { [POLICY_CLIENT_HEADER]: 'agent-ops' } : {}),
  };
}

export async function finalStates(url: string, token: string, ids: string[], headersOf?: (id: string) => Record<string, string>): Promise<Map<string, FinalState>> {
  return readFinals(url, token, ids, (id) => `/mcp/deliveries/${id}`, (body) => ({ status: 200, state: body as StateJson }), headersOf);
}

export async function deliveryRows(databaseUrl: string): Promise<Map<string, Record<string, unknown>>> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<Record<string, unknown>>('select * from deliveries');
    return new Map(rows.map((r) => [String(r['request_id']), JSON.parse(JSON.stringify(r)) as Record<string, unknown>]));
  } finally {
    await client.end();
  }
}

/** Every line any Herald process of the phase printed about these request_ids (capped). */
export function logLines(fleet: Fleet, ids: string[]): string[] {
  const out: { at: number; line: string }[] = [];
  for (const inc of fleet.incarnations) {
    for (const line of inc.output().split('\n')) {
      // The dispatcher's lines about them, not the HTTP access log of every GET.
      if (!ids.some((id) => line.includes(`"request_id":"${id}"`))) continue;
      out.push({ at: Number(/"time":([0-9]+)/.exec(line)?.[1] ?? 0), line: `${inc.member}#${inc.pid ?? '-'} ${line.length > 600 ? `${line.slice(0, 600)}…` : line}` });
    }
  }
  // In time order across processes (pino's "time"), so one delivery's story reads top to bottom.
  const lines = out.sort((a, b) => a.at - b.at).map((x) => x.line);
  return lines.length > 80 ? [...lines.slice(0, 40), `… ${lines.length - 80} more …`, ...lines.slice(-40)] : lines;
}

/** What the gateway holders did: start-ups, gateway connects, nonce reports it could not record, its ends. */
const GATEWAY_MESSAGES = /"msg":"(herald started|connecting to the Discord gateway|gateway connected[^"]*|could not record a sent message reported by the gateway|gateway error|gateway unavailable[^"]*|gateway event could not be handled[^"]*|database connection lost[^"]*)"/;

function gatewayLines(fleet: Fleet, t0: number, fromMs: number, untilMs: number): string[] {
  const out: { at: number; line: string }[] = [];
  for (const inc of fleet.incarnations) {
    // Every serve member may hold the gateway (by its lease).
    if (!inc.member.startsWith('serve')) continue;
    const who = `${inc.member}#${inc.pid ?? '-'}`;
    out.push({ at: t0 + inc.startedAt, line: `${who} spawned` });
    for (const line of inc.output().split('\n')) {
      const msg = GATEWAY_MESSAGES.exec(line);
      if (msg === null) continue;
      const err = /"err":"([^"]{0,160})/.exec(line)?.[1];
      out.push({ at: Number(/"time":([0-9]+)/.exec(line)?.[1] ?? 0), line: `${who} ${msg[1] ?? ''}${err !== undefined ? `: ${err}` : ''}` });
    }
    if (inc.endedAt !== undefined) out.push({ at: t0 + inc.endedAt, line: `${who} ended (${inc.end?.killed === true ? 'killed by the campaign' : `exited by itself: ${inc.end?.code ?? inc.end?.signal ?? '?'}`})` });
  }
  return out
    .filter((x) => x.at >= fromMs && x.at <= untilMs)
    .sort((a, b) => a.at - b.at)
    .map((x) => `${new Date(x.at).toISOString()} ${x.line}`);
}

/** When the sandbox's creates (POSTs of a message) arrived, those it answered 200. */
export function createTimes(sandbox: DiscordSandbox): number[] {
  return sandbox.requests.filter((r) => r.method === 'POST' && /^\/channels\/[0-9]+\/messages$/.test(r.path) && r.status === 200).map((r) => r.at);
}

function progressLine(ledger: Map<string, Tracked>, sandbox: DiscordSandbox, fleet: Fleet): string {
  const all = [...ledger.values()];
  const delivered = all.filter((t) => t.last?.state === 'delivered').length;
  return `progress: ${all.length} deliveries (${all.filter((t) => t.accepted).length} accepted, ${delivered} seen delivered), ${sandbox.allMessages().length} messages, ${fleet.kills} kills, ${fleet.crashes.length} crashes, ${fleet.serveUrls().length} serve up`;
}

export function summarizeOpen(open: Tracked[]): string {
  const by: Record<string, number> = {};
  for (const t of open) {
    const key = t.last?.state ?? (t.accepted ? 'accepted' : 'unacknowledged');
    by[key] = (by[key] ?? 0) + 1;
  }
  return Object.entries(by)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
}

/** Sleep up to `ms`, waking early (false) when `running()` turns false. */
export async function sleepWhile(ms: number, running: () => boolean): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (!running()) return false;
    await sleep(Math.min(100, end - Date.now()));
  }
  return running();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
