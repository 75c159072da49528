import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { POLICY_CLIENT_HEADER } from '../../src/infra/http/policy.middleware.js';
import { DiscordSandbox, SANDBOX_IDS, type SandboxMessage } from '../../src/platforms/discord/sandbox/sandbox.js';
import { SLACK_SANDBOX_IDS, SlackSandbox, type SlackFaults } from '../../src/platforms/slack/sandbox/sandbox.js';
import { heraldEnv, newToken } from '../support/herald.js';
import { webClient } from '../support/slack-sandbox.js';
import { waitFor } from '../support/wait.js';
import {
  deliveryRows,
  finalStates,
  HERALD_TIMINGS,
  logLines,
  makeSchedule,
  memberSpecs,
  sleepWhile,
  summarizeOpen,
  type PhaseContext,
  type PhaseResult,
} from './campaign.js';
import { Connector, newStats, type Action, type Tracked } from './connector.js';
import { Fleet } from './fleet.js';
import { preparePhaseDatabase, readFromApiOnly, settle, startChaos, type ChaosRun } from './phase-kit.js';
import { kindLines } from './report.js';
import { TakeoverWatch, takeoverNotes } from './takeover.js';
import { Rng } from './prng.js';
import { verifySlack, type SlackChannelMessage } from './slack-verify.js';
import { verify, violationTotal, zeroCounts, type PhaseCounts, type Violation } from './verify.js';
import { PausePlan } from './pauses.js';
import { InFlightTap } from './in-flight.js';
import { StaleWatch } from './stale-watch.js';

/**
 * The Slack phase of the chaos campaign: the same fleet of real `herald serve`/`herald dispatch`
 * processes (SIGKILLed and restarted, PostgreSQL stopped hard), Discord still their home, posting
 * to destinations mapped to channels of a Slack sandbox this phase starts, with Slack's faults on a
 * schedule: a message created and its answer lost, 503s, 429s with Retry-After. Slack has no
 * idempotency key, so every create in doubt must be settled by finding the delivery's key in the
 * channel's history. The verdict: exactly one message carrying each delivered post's key.
 *
 * Herald speaks in two Slack workspaces (HERALD_SLACK_IDENTITIES, docs/guides/identities.md): the
 * default one and `ops`, where the app has a bot of its own; and as two Discord bots
 * (HERALD_DISCORD_IDENTITIES): Herald's own and `ops`. The odd-numbered connectors' agent is bound
 * to the identity `ops` and posts to a guild of its own, whose Slack destinations are mapped to
 * channels of the ops workspace: each of their messages must be there, from the ops bot, and every
 * other message in the default workspace from the default bot (misattributed otherwise). Both
 * guilds' `digest` goes to one Discord channel, where each message must come from its agent's
 * Discord bot: one phase, two identities on each of two platforms.
 */

/** The destinations mapped to Slack channels, each its own (ops stays unmapped). */
const DESTINATIONS = ['alerts', 'deals'] as const;
/** The destination each guild maps to a Discord channel: the sandbox's #digest, and the ops guild's own. */
const ON_DISCORD = 'digest';
/** The ops guild's Discord channel (only the ops bot is a member of that guild). */
const OPS_DISCORD_CHANNEL = '345678901234567881';
/** The guild the ops agent posts to: its destinations are the ops workspace's channels. */
const OPS_GUILD = '234567890123456781';

/**
 * Posts only (unique, identical-content groups, blind re-POSTs, a few to the unmapped destination),
 * at a pace the three channels can take: Slack admits one message per second per channel.
 */
const ACTIONS: readonly (readonly [Action, number])[] = [
  ['post', 50],
  ['group', 8],
  ['blind-repost', 12],
  ['unmapped', 2],
];
const PAUSE_MS = [1_200, 2_800] as const;
/** One Slack fault every 1–3 s of the chaos. */
const FAULT_GAP_MS = [1_000, 3_000] as const;


/** See where the phase's environment is built. */
const SLACK_LEASE_MS = '10000';
const SLACK_TIMEOUT_MS = '4000';
/** Seconds the Slack phase may settle, at least. */
const SLACK_SETTLE_S = 90;

type SlackFault = (faults: SlackFaults) => void;

function randomSlackFault(rng: Rng): [string, SlackFault] {
  const kind = rng.weighted([
    ['drop answer after create', 4],
    ['create 503', 3],
    ['create 429', 3],
    ['history 503', 1],
  ] as const);
  switch (kind) {
    case 'drop answer after create': {
      const n = rng.int(1, 2);
      return [kind, (f) => f.dropAnswerAfterCreate(n)];
    }
    case 'create 503': {
      const n = rng.int(1, 3);
      return [kind, (f) => f.failNext('chat.postMessage', 503, n)];
    }
    case 'create 429': {
      const retryAfter = rng.int(1, 2);
      const n = rng.int(1, 2);
      return [kind, (f) => f.rateLimitNext('chat.postMessage', retryAfter, n)];
    }
    case 'history 503': {
      const n = rng.int(1, 2);
      return [kind, (f) => f.failNext('conversations.history', 503, n)];
    }
  }
}

/**
 * `slack-pauses` is this phase without SIGKILLs, its processes stalled past their lease instead
 * (test/chaos/pauses.ts): at their fault points, at random, and with a chat.postMessage in flight
 * (each process reaches the Slack sandbox through a proxy of its own that sees its creates leave).
 */
export async function runSlackPhase(c: PhaseContext, phase: 'slack' | 'slack-pauses' = 'slack'): Promise<PhaseResult> {
  const rng = new Rng(c.seed, phase);
  const t0 = Date.now();
  const stamp = () => `[${phase} ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`;
  const log = (line: string) => c.log(`${stamp()} ${line}`);
  log(`phase ${phase}: ${c.processes} Herald processes, ${c.connectors} connectors, ${c.durationS}s of chaos; posts to Slack channels (1 message/s/channel), Discord home`);

  const discord = await new DiscordSandbox().start();
  const slack = new SlackSandbox();
  await slack.start(0, '127.0.0.1');
  const ops = slack.addWorkspace('ops');
  discord.addGuild(OPS_GUILD, 'ops');
  // The ops identity's Discord bot, a member of the ops guild, which has a channel of its own.
  const opsBot = discord.addBot('herald-ops');
  discord.addChannel({ id: OPS_DISCORD_CHANNEL, type: 0, name: 'ops-digest', guild_id: OPS_GUILD });
  discord.people.setMember(OPS_GUILD, opsBot.user.id, []);
  const plan = phase === 'slack-pauses' ? new PausePlan(new Rng(c.seed, `${phase}-plan`), Number(SLACK_LEASE_MS)) : undefined;
  const tap = plan !== undefined ? new InFlightTap(plan, /^POST \/api\/chat\.postMessage[ ?]/) : undefined;
  let fleet: Fleet | undefined;
  const aborted = () => c.signal?.aborted === true;
  const onAbort = () => void fleet?.stopAll();
  c.signal?.addEventListener('abort', onAbort);
  try {
    const { databaseUrl, dataDir } = await preparePhaseDatabase(c, phase);
    const bridgeToken = newToken();
    const adminToken = newToken();
    // Lease and timeout longer than the other phases' (3 s, 1 s): Slack admits one message per
    // second per channel and about 50 history reads a minute, so a request may wait its turn for
    // seconds, and an attempt gives up waiting when its lease ends. (Read here, not at load:
    // campaign.ts and this module import each other.)
    const extra = { ...HERALD_TIMINGS, HERALD_LEASE_MS: SLACK_LEASE_MS, HERALD_SLACK_TIMEOUT_MS: SLACK_TIMEOUT_MS };
    const policyFile = path.join(c.workDir, `${phase}-agents.yaml`);
    await writeFile(policyFile, 'clients:\n  agent-ops: { identity: ops }\n');
    const identities = {
      HERALD_SLACK_IDENTITIES: 'ops=env:CHAOS_OPS_SLACK_TOKEN',
      CHAOS_OPS_SLACK_TOKEN: ops.botToken,
      HERALD_DISCORD_IDENTITIES: 'ops=env:CHAOS_OPS_BOT_TOKEN',
      CHAOS_OPS_BOT_TOKEN: opsBot.token,
      HERALD_POLICY: policyFile,
    };
    const env = heraldEnv(
      { sandbox: discord, db: { databaseUrl, dataDir, drop: async () => undefined }, bridgeToken, adminToken },
      { HOST: '127.0.0.1', LOG_LEVEL: 'info', ...extra, SLACK_BOT_TOKEN: slack.botToken, SLACK_API_URL: slack.apiUrl, ...identities },
    );

    // One channel per guild and destination, created by its workspace's bot (so it is a member), empty at the start.
    const byOps = (connector: number): boolean => connector % 2 === 1;
    const workspaces = [
      { guild: SANDBOX_IDS.guild, client: webClient(slack), prefix: 'chaos', bot: SLACK_SANDBOX_IDS.bot.user },
      { guild: OPS_GUILD, client: webClient(slack, ops.botToken), prefix: 'chaos-ops', bot: ops.ids.bot.user },
    ];
    const channels: Record<string, string> = {};
    for (const w of workspaces) {
      for (const destination of DESTINATIONS) {
        const created = (await w.client.conversations.create({ name: `${w.prefix}-${destination}` })) as { channel?: { id?: string } };
        channels[`${w.guild}/${destination}`] = created.channel?.id ?? '';
      }
    }

    const specs = memberSpecs(c.processes, env);
    if (plan !== undefined && tap !== undefined) {
      const slackPort = Number(new URL(slack.apiUrl).port);
      for (const spec of specs) spec.env['SLACK_API_URL'] = `http://127.0.0.1:${await tap.proxy(spec.name, slackPort)}/api/`;
      plan.prepare(specs);
    }
    fleet = new Fleet(specs, log, c.pidFile, t0);
    const f = fleet;
    log(`starting ${specs.map((s) => s.name).join(', ')}`);
    await fleet.startAll();
    c.signal?.throwIfAborted();
    for (const [at, channel] of Object.entries(channels)) await mapTo(f, adminToken, at, { transport: 'slack', channel });
    const onDiscord = [
      { guild: SANDBOX_IDS.guild, channel: SANDBOX_IDS.channels.digest, bot: discord.bot.id },
      { guild: OPS_GUILD, channel: OPS_DISCORD_CHANNEL, bot: opsBot.user.id },
    ];
    for (const d of onDiscord) await mapTo(f, adminToken, `${d.guild}/${ON_DISCORD}`, { channel_id: d.channel });
    const setupMs = Date.now() - t0;
    log(`ready in ${(setupMs / 1000).toFixed(1)}s: ${Object.entries(channels).map(([at, channel]) => `${at} → ${channel}`).join(', ')}, ${onDiscord.map((d) => `${d.guild}/${ON_DISCORD} → Discord ${d.channel}`).join(', ')} (ops left unmapped on purpose); odd connectors speak as the ops identity (its Slack workspace's bot, its Discord bot)`);

    const ledger = new Map<string, Tracked>();
    const stats = newStats();
    const ctx = {
      phase,
      t0,
      bridgeToken,
      servers: () => f.serveUrls(),
      ledger,
      stats,
      log,
      maxFailedReposts: 2,
      actions: ACTIONS,
      pauseMs: PAUSE_MS,
      agentOf: (connector: number) => (byOps(connector) ? { [POLICY_CLIENT_HEADER]: 'agent-ops' } : {}),
      guildOf: (connector: number) => (byOps(connector) ? OPS_GUILD : SANDBOX_IDS.guild),
    };
    const connectors = Array.from({ length: c.connectors }, (_, i) => new Connector(i, rng.fork('connectors'), ctx));
    let acting = true;
    let following = true;
    const acts = connectors.map((k) => k.act(() => acting && !aborted()));
    const follows = connectors.map((k) => k.followUp(() => following && !aborted()));
    const chaosStart = Date.now();
    const schedule = makeSchedule(rng.fork('schedule'), c.durationS * 1000, c.processes, randomSlackFault, FAULT_GAP_MS).filter((e) => plan === undefined || e.what !== 'kill');
    const allMessages = (): SlackChannelMessage[] => Object.values(channels).flatMap((channel) => slack.messages(channel).map((m) => ({ ...m, channel })));
    const progress = setInterval(() => log(progressLine(ledger, allMessages().length, f, slack)), 10_000);
    const takeovers = new TakeoverWatch(databaseUrl, f, t0, () => discord.gatewaySessions);
    const stale = new StaleWatch(databaseUrl);
    let chaos: ChaosRun | undefined;
    try {
      chaos = startChaos(c, f, schedule, log, (fault: SlackFault) => fault(slack.faults));
      plan?.start(f, log, tap !== undefined ? () => tap.arm() : undefined);
      const { pg, faultCounts } = chaos;
      await sleepWhile(c.durationS * 1000, () => !aborted());
      acting = false;
      const stopping = chaos.stop();
      await Promise.all(acts);
      await stopping;
      tap?.disarm();
      await plan?.drain(specs);
      c.signal?.throwIfAborted();
      const chaosMs = Date.now() - chaosStart;
      log(`chaos over: ${ledger.size} deliveries, ${f.kills} kills, ${pg.restarts} PostgreSQL restarts, ${Object.values(faultCounts).reduce((a, b) => a + b, 0)} faults, ${f.crashes.length} crashes`);

      slack.faults.clear();
      takeovers.settling();
      log('settling: faults cleared, restarting every Herald process');
      await f.restartAll();
      const open = () => [...ledger.values()].filter((t) => !Connector.settled(t));
      // Longer than the others: Slack sends one message a second per channel and reads about 50
      // histories a minute, so the posts in doubt at the end drain slower than Discord's.
      const { settled, settleMs } = await settle({ ...c, settleS: Math.max(c.settleS, SLACK_SETTLE_S) }, () => open().length, () => summarizeOpen(open()), log);
      following = false;
      await Promise.all(follows);
      c.signal?.throwIfAborted();

      const verifyStart = Date.now();
      const handovers = await takeovers.stop();
      const staleRows = await stale.stop();
      await f.stopAll();
      const messages = allMessages();
      // Each delivery is read back by its own agent (another agent's deliveries are not its to see).
      const agentOfId = (id: string): Record<string, string> => ctx.agentOf(ledger.get(id)?.connector ?? 0);
      const finals = await readFromApiOnly(env, (url) => finalStates(url, bridgeToken, [...ledger.keys()], agentOfId));
      const rows = await deliveryRows(databaseUrl);
      // What went to Discord is judged by Discord's verdict (nonces, authors), one guild's channel
      // at a time, each from its agent's bot; the rest by Slack's. Every Discord message is in one of them.
      const toDiscord = [...ledger.values()].filter((t) => t.destination === ON_DISCORD);
      const discordMessages: SandboxMessage[] = discord.allMessages().map((m) => ({ ...m }));
      const discordVerdict = { counts: zeroCounts({ deliveries: 0, posts: 0, dms: 0, edits: 0, messages: 0 }), violations: [] as Violation[] };
      for (const d of onDiscord) {
        const verdict = verify({
          tracked: toDiscord.filter((t) => guildOfTracked(t) === d.guild),
          finals,
          messages: discordMessages.filter((m) => m.channel_id === d.channel),
          channels: { [ON_DISCORD]: d.channel },
          dmChannels: [],
          rows,
          logsFor: (ids) => logLines(f, ids),
          authorOf: () => d.bot,
        });
        addCounts(discordVerdict.counts, verdict.counts);
        discordVerdict.violations.push(...verdict.violations);
      }
      const elsewhere = discordMessages.filter((m) => !onDiscord.some((d) => d.channel === m.channel_id));
      for (const m of elsewhere) discordVerdict.violations.push({ kind: 'orphan', requestIds: [], detail: `a Discord message in ${m.channel_id}, where no destination goes`, evidence: { message: { id: m.id, author: m.author.id, nonce: m.nonce } } });
      discordVerdict.counts.orphans += elsewhere.length;
      const { counts, violations, unknownNotes, failedNotes } = verifySlack({
        tracked: [...ledger.values()].filter((t) => t.destination !== ON_DISCORD),
        finals,
        messages,
        channelOf: (t) => channels[`${guildOfTracked(t) ?? ''}/${t.destination ?? ''}`],
        botOf: (t) => (workspaces[byOps(t.connector) ? 1 : 0] ?? workspaces[0])?.bot,
        workspaceUrlOf: (channel) => (Object.entries(channels).some(([at, id]) => id === channel && at.startsWith(`${OPS_GUILD}/`)) ? `${slack.workspaceUrl}${ops.ids.team}/` : slack.workspaceUrl),
        rows,
        logsFor: (ids) => logLines(f, ids),
      });
      const verifyMs = Date.now() - verifyStart;
      const sandboxRequests: Record<string, number> = {};
      for (const method of ['auth.test', 'chat.postMessage', 'conversations.history', 'conversations.info', 'conversations.join']) sandboxRequests[method] = slack.calls(method);
      sandboxRequests['429 answered'] = slack.ratelimited;
      // Stale writes, as in Discord's phases: a row changed after it was first seen delivered.
      for (const [id, what] of staleRows) violations.push({ kind: 'stale-write', requestIds: [id], detail: `changed after delivery in the store: ${what}` });
      counts.staleWrites = staleRows.size;
      violations.push(...discordVerdict.violations);
      const total = counts.duplicates + counts.lost + counts.stuck + counts.misattributed + counts.failedButSent + counts.orphans + staleRows.size + violationTotal(discordVerdict.counts);
      addCounts(counts, discordVerdict.counts);
      const result: PhaseResult = {
        phase,
        counts,
        violationCount: total,
        violations,
        undecided: [],
        chaos: { kills: f.kills, pgRestarts: pg.restarts, faults: faultCounts, crashes: f.crashes, startFailures: f.startFailures, sandboxRequests },
        connectors: stats,
        settled,
        timings: { setupMs, chaosMs, settleMs, verifyMs },
        config: { sandboxNonceWindowMs: 0, heraldNonceWindowMs: undefined, env: extra },
        notes: [
          ...kindLines([...ledger.values()], violations),
          ...(plan?.note() ?? []),
          ...(tap !== undefined ? [tap.note('chat.postMessage')] : []),
          ...takeoverNotes(handovers),
          workspacesNote([...ledger.values()], messages, byOps, ops.ids.bot.user),
          discordNote(toDiscord, discordMessages, byOps, opsBot.user.id, discordVerdict.counts),
          `Slack calls: ${Object.entries(sandboxRequests)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')} (the injected 429s included)`,
          `unknown: ${unknownNotes.length} deliveries were seen unknown during the run (a create in doubt whose key Herald could not yet look up in the channel's history), each re-POSTed by its connector; ${counts.states.unknown} left unknown at the end (stuck: with the key in every message's metadata Herald can always decide); how each ended:`,
          ...unknownNotes.slice(0, 10).map((n) => `  - ${n}`),
          ...(unknownNotes.length > 10 ? [`  … ${unknownNotes.length - 10} more`] : []),
          `failed though mapped: ${failedNotes.length} (not violations when no message carries their key, as in the other phases)`,
          ...failedNotes.slice(0, 10).map((n) => `  - ${n}`),
        ],
      };
      log(`verdict: ${total === 0 ? 'no violations' : `${total} VIOLATIONS`}`);
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
    plan?.close();
    await tap?.close();
    await slack.close();
    await discord.close();
  }
}

/** How many deliveries each agent made, and how many messages the ops workspace's bot sent: the line the report shows. */
function workspacesNote(tracked: readonly Tracked[], messages: readonly SlackChannelMessage[], byOps: (connector: number) => boolean, opsBot: string): string {
  const fromOps = tracked.filter((t) => byOps(t.connector)).length;
  const opsMessages = messages.filter((m) => m.user === opsBot).length;
  return `workspaces: ${fromOps} deliveries by the agent bound to ops (odd connectors), ${tracked.length - fromOps} by the others; ${opsMessages} of ${messages.length} messages from the ops workspace's bot; each checked against its agent's workspace and bot (misattributed otherwise)`;
}

/** The guild a delivery's target names. */
function guildOfTracked(t: Tracked): string | undefined {
  const guild = (t.payload['target'] as { guild_id?: unknown } | undefined)?.guild_id;
  return typeof guild === 'string' ? guild : undefined;
}

/** The Discord side of the phase, for the report: who posted there, and what the verdict saw. */
function discordNote(tracked: readonly Tracked[], messages: readonly SandboxMessage[], byOps: (connector: number) => boolean, opsBot: string, counts: PhaseCounts): string {
  const fromOps = tracked.filter((t) => byOps(t.connector)).length;
  return `discord: ${tracked.length} posts to ${ON_DISCORD} (${fromOps} by the agent bound to ops, from its Discord bot), ${messages.length} messages (${messages.filter((m) => m.author.id === opsBot).length} from the ops bot), ${counts.states.delivered} delivered, ${counts.duplicates} duplicates, ${counts.lost} lost, ${counts.misattributed} misattributed`;
}

/** Add a second verdict's counts to the first's (the states too). */
function addCounts(into: PhaseCounts, more: PhaseCounts): void {
  for (const [key, value] of Object.entries(more) as [keyof PhaseCounts, unknown][]) {
    if (typeof value === 'number') (into as unknown as Record<string, number>)[key] = ((into[key] as number | undefined) ?? 0) + value;
  }
  for (const [state, n] of Object.entries(more.states) as [keyof PhaseCounts['states'], number][]) into.states[state] += n;
}

/** PUT /admin/destinations/{guild}/{destination} with a channel (Herald checks it with its platform); `at` is `guild/destination`. */
async function mapTo(fleet: Fleet, adminToken: string, at: string, body: Record<string, string>): Promise<void> {
  const [guild, destination] = at.split('/');
  await waitFor(
    async () => {
      const url = fleet.serveUrls()[0];
      if (url === undefined) return false;
      const res = await fetch(`${url}/admin/destinations/${guild ?? ''}/${destination ?? ''}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(5_000),
      });
      if (res.status !== 200) throw new Error(`PUT destination ${at} → ${JSON.stringify(body)}: ${res.status} ${await res.text()}`);
      return true;
    },
    `mapping ${at}`,
    30_000,
  );
}

function progressLine(ledger: Map<string, Tracked>, messages: number, fleet: Fleet, slack: SlackSandbox): string {
  const all = [...ledger.values()];
  const delivered = all.filter((t) => t.last?.state === 'delivered').length;
  return `progress: ${all.length} deliveries (${all.filter((t) => t.accepted).length} accepted, ${delivered} seen delivered), ${messages} Slack messages, ${slack.ratelimited} 429s, ${fleet.kills} kills, ${fleet.crashes.length} crashes, ${fleet.serveUrls().length} serve up`;
}
