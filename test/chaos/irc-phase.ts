import { DiscordSandbox } from '../../src/platforms/discord/sandbox/sandbox.js';
import { heraldEnv, newToken } from '../support/herald.js';
import { startIrcd, type Ircd } from '../support/inspircd.js';
import { waitFor } from '../support/wait.js';
import { deliveryRows, HERALD_TIMINGS, logLines, makeSchedule, memberSpecs, sleep, sleepWhile, type PhaseContext, type PhaseResult } from './campaign.js';
import { ChatConnector, newChatStats, type ChatStateJson, type TrackedChat } from './irc-connector.js';
import { connectorLine, IrcWatcher, verifyIrcChat, type ChatFinal } from './irc-verify.js';
import { Fleet } from './fleet.js';
import { preparePhaseDatabase, readFinals, readFromApiOnly, settle, startChaos } from './phase-kit.js';
import { Rng } from './prng.js';
import { TakeoverWatch, takeoverNotes } from './takeover.js';
import { PausePlan } from './pauses.js';
import { InFlightTap } from './in-flight.js';
import { StaleWatch } from './stale-watch.js';

/**
 * The IRC chat phase of the chaos campaign: simulated agents send chat lines
 * (`POST /mcp/chat/messages`) under several nicks to the channels of a throwaway InspIRCd,
 * through real `herald serve`/`herald dispatch` processes that are SIGKILLed and restarted, with
 * PostgreSQL stopped hard, and the InspIRCd itself SIGKILLed and started again on the same port
 * (a restart wipes its channels and history). An IRC client of the phase's own watches every
 * channel (irc-verify.ts): each send's lines must arrive exactly once, from the agent's nick, in
 * its channel, and Herald's final answer must agree. Along the way it measures how long the
 * `irc:observer` lease takes to move when its holder is killed, and checks that a channel never
 * shows two Herald observers.
 */

const CHANNELS = ['#chaos-a', '#chaos-b', '#chaos-c'] as const;
const SENDERS = ['ada', 'bob', 'cyd', 'dee'] as const;
const WATCHER_NICK = 'watcher';
/** A send every 0.4–1.2 s per connector: a few lines a second in all, as agents chat. */
const PAUSE_MS = [400, 1_200] as const;
/**
 * The lease of the IRC connections (one replica holds them all) and the echo wait, short for the
 * campaign: a killed holder is replaced in seconds, and an attempt gives up on an echo well within
 * its outbox lease (HERALD_LEASE_MS, 3 s).
 */
const IRC_TIMINGS = { HERALD_SINGLETON_TTL_MS: '3000', HERALD_IRC_ECHO_TIMEOUT_MS: '1500', HERALD_IRC_LINES_PER_SECOND: '10' };
/** One InspIRCd restart per this much chaos (at least one); down long enough that its boot time (in msgids) changes. */
const IRCD_RESTART_EVERY_MS = 12_000;
const IRCD_DOWN_MS = [1_000, 2_500] as const;
/**
 * Seconds the phase may settle, at least. A send in doubt across an InspIRCd restart cannot be
 * proven either way (the observer's record of the channel broke), so it spends its attempts and
 * then waits for the final check (RECONCILE_SETTLE_MS, 11 s after the doubt) before it is
 * reported unknown; with every process restarted first under a loaded machine, 25 s ran out.
 */
const IRC_SETTLE_S = 60;

/**
 * `irc-pauses` is this phase without SIGKILLs of Herald, its processes stalled past their lease
 * instead (test/chaos/pauses.ts): at their fault points, at random, and with a PRIVMSG in flight
 * (each process reaches InspIRCd through a proxy of its own that sees its lines leave).
 */
export async function runIrcChatPhase(c: PhaseContext, PHASE: 'irc-chat' | 'irc-pauses' = 'irc-chat'): Promise<PhaseResult> {
  const rng = new Rng(c.seed, PHASE);
  const t0 = Date.now();
  const stamp = () => `[${PHASE} ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`;
  const log = (line: string) => c.log(`${stamp()} ${line}`);
  log(`phase ${PHASE}: ${c.processes} Herald processes, ${c.connectors} connectors, ${c.durationS}s of chaos; chat lines to ${CHANNELS.join(', ')} on a throwaway InspIRCd, killed and restarted too`);

  const discord = await new DiscordSandbox().start();
  const plan = PHASE === 'irc-pauses' ? new PausePlan(new Rng(c.seed, `${PHASE}-plan`), Number(HERALD_TIMINGS.HERALD_LEASE_MS)) : undefined;
  const tap = plan !== undefined ? new InFlightTap(plan, /PRIVMSG #/) : undefined;
  let stale: StaleWatch | undefined;
  let ircd: Ircd | undefined;
  let fleet: Fleet | undefined;
  let watcher: IrcWatcher | undefined;
  let takeoverWatch: TakeoverWatch | undefined;
  const aborted = () => c.signal?.aborted === true;
  const onAbort = () => void fleet?.stopAll();
  c.signal?.addEventListener('abort', onAbort);
  try {
    ircd = await startIrcd();
    const irc = ircd;
    const { databaseUrl, dataDir } = await preparePhaseDatabase(c, PHASE);
    const bridgeToken = newToken();
    const adminToken = newToken();
    const extra = { ...HERALD_TIMINGS, ...IRC_TIMINGS };
    const env = heraldEnv(
      { sandbox: discord, db: { databaseUrl, dataDir, drop: async () => undefined }, bridgeToken, adminToken },
      { HOST: '127.0.0.1', LOG_LEVEL: 'info', ...extra, HERALD_IRC_URL: irc.url, HERALD_IRC_NICK: 'herald', HERALD_IRC_CHANNELS: CHANNELS.join(',') },
    );
    const specs = memberSpecs(c.processes, env);
    if (plan !== undefined && tap !== undefined) {
      for (const spec of specs) spec.env['HERALD_IRC_URL'] = `irc://127.0.0.1:${await tap.proxy(spec.name, irc.port)}`;
      plan.prepare(specs);
    }
    fleet = new Fleet(specs, log, c.pidFile, t0);
    const f = fleet;
    log(`starting ${specs.map((s) => s.name).join(', ')} (InspIRCd on port ${irc.port})`);
    await fleet.startAll();
    c.signal?.throwIfAborted();
    watcher = new IrcWatcher(irc.port, WATCHER_NICK, CHANNELS, t0);
    const w = watcher;
    w.start();
    // Ready: the observer of the phase and one Herald observer in every channel.
    await waitFor(() => w.present && CHANNELS.every((ch) => w.names.some((s) => s.channel === ch && s.heralds.length === 1)), 'the watcher and Herald\'s observer in every channel', 30_000);
    const setupMs = Date.now() - t0;
    log(`ready in ${(setupMs / 1000).toFixed(1)}s: the watcher and Herald's observer are in ${CHANNELS.join(', ')}`);

    const takeovers = new TakeoverWatch(databaseUrl, f, t0);
    takeoverWatch = takeovers;
    const ledger = new Map<string, TrackedChat>();
    const stats = newChatStats();
    const ctx = { phase: PHASE, t0, bridgeToken, servers: () => f.serveUrls(), ledger, stats, log, channels: CHANNELS, senders: SENDERS, pauseMs: PAUSE_MS };
    const connectors = Array.from({ length: c.connectors }, (_, i) => new ChatConnector(i, rng.fork('connectors'), ctx));
    let acting = true;
    let following = true;
    const acts = connectors.map((k) => k.act(() => acting && !aborted()));
    const follows = connectors.map((k) => k.followUp(() => following && !aborted()));
    const chaosStart = Date.now();
    // Kills and PostgreSQL outages as in every phase; no platform faults but the InspIRCd restarts below.
    const schedule = makeSchedule(rng.fork('schedule'), c.durationS * 1000, c.processes).filter((e) => e.what !== 'fault' && (plan === undefined || e.what !== 'kill'));
    const ircdPlan = ircdRestarts(rng.fork('ircd'), c.durationS * 1000);
    const progress = setInterval(() => log(progressLine(ledger, w, f)), 10_000);
    try {
      const chaos = startChaos(c, f, schedule, log, () => undefined);
      stale = new StaleWatch(databaseUrl);
      plan?.start(f, log, tap !== undefined ? () => tap.arm() : undefined);
      const { pg } = chaos;
      let chaosOn = true;
      const ircdRun = runIrcdRestarts(irc, ircdPlan, chaosStart, () => chaosOn && !aborted(), log);
      await sleepWhile(c.durationS * 1000, () => !aborted());
      acting = false;
      chaosOn = false;
      const stopping = chaos.stop();
      const ircdRestarted = await ircdRun;
      await Promise.all(acts);
      await stopping;
      tap?.disarm();
      await plan?.drain(specs);
      takeovers.settling();
      c.signal?.throwIfAborted();
      const chaosMs = Date.now() - chaosStart;
      log(`chaos over: ${ledger.size} sends, ${f.kills} kills, ${pg.restarts} PostgreSQL restarts, ${ircdRestarted.length} InspIRCd restarts, ${f.crashes.length} crashes`);
      log('settling: restarting every Herald process');
      await f.restartAll();
      const open = () => [...ledger.values()].filter((t) => !ChatConnector.settled(t));
      const { settled, settleMs } = await settle({ ...c, settleS: Math.max(c.settleS, IRC_SETTLE_S) }, () => open().length, () => summarizeOpen(open()), log);
      following = false;
      await Promise.all(follows);
      c.signal?.throwIfAborted();

      const verifyStart = Date.now();
      await f.stopAll();
      const handovers = await takeovers.stop();
      const staleRows = await stale.stop();
      // The last lines reach the watcher; then nothing more is written.
      await sleep(500);
      w.stop();
      // Final states from an API-only Herald without IRC (it must not take the lease or connect).
      const apiEnv = { ...env, PORT: '0', HERALD_GATEWAY: 'off', LOG_LEVEL: 'silent' };
      delete (apiEnv as Record<string, string | undefined>)['HERALD_IRC_URL'];
      delete (apiEnv as Record<string, string | undefined>)['HERALD_IRC_CHANNELS'];
      const finals = await readFromApiOnly(apiEnv, (url) => chatFinals(url, bridgeToken, [...ledger.keys()]));
      const rows = await deliveryRows(databaseUrl);
      const verdict = verifyIrcChat({ tracked: [...ledger.values()], finals, watcher: w, channels: CHANNELS, rows, logsFor: (ids) => logLines(f, ids), ircLog: (from, until) => ircLines(f, t0, from, until) });
      const names = namesSummary(w, { from: chaosStart - t0, until: chaosStart + chaosMs - t0 });
      const verifyMs = Date.now() - verifyStart;
      const k = verdict.counts;
      // Stale writes, as in Discord's phases: a row changed after it was first seen delivered.
      for (const [id, what] of staleRows) verdict.violations.push({ kind: 'stale-write', requestIds: [id], detail: `changed after delivery in the store: ${what}` });
      k.staleWrites = staleRows.size;
      // A stopped process cannot leave a channel (its connection stays open until the server's ping
      // timeout): two observers while one is stopped, or within the lease's TTL after it was
      // continued (it gives its connections up once it sees the lease gone), are reported, not counted.
      const grace = Number(IRC_TIMINGS.HERALD_SINGLETON_TTL_MS) + 2_000;
      const whileStalled = plan !== undefined ? names.twoAtOnce.filter((s) => plan.stalledAround(t0 + s.at, grace)) : [];
      names.twoAtOnce = names.twoAtOnce.filter((s) => !whileStalled.includes(s));
      const violationCount = verdict.violationCount + names.twoAtOnce.length + staleRows.size;
      for (const s of names.twoAtOnce) verdict.violations.push({ kind: 'duplicate', requestIds: [], detail: `two Herald observers at once in ${s.channel} at ${(s.at / 1000).toFixed(2)}s: ${s.heralds.join(', ')}` });
      const seenLines = w.lines.length;
      const result: PhaseResult = {
        phase: PHASE,
        counts: k,
        violationCount,
        violations: verdict.violations,
        undecided: [],
        chaos: { kills: f.kills, pgRestarts: pg.restarts, faults: { 'InspIRCd SIGKILL+restart': ircdRestarted.length }, crashes: f.crashes, startFailures: f.startFailures, sandboxRequests: {} },
        connectors: stats,
        settled,
        timings: { setupMs, chaosMs, settleMs, verifyMs },
        config: { sandboxNonceWindowMs: 0, heraldNonceWindowMs: undefined, env: extra },
        notes: [
          `kind chat-irc: sent ${k.deliveries}, duplicates ${k.duplicates}, lost ${k.lost}, stuck ${k.stuck}, misattributed ${k.misattributed}`,
          ...takeoverNotes(handovers),
          ...(plan?.note() ?? []),
          ...(tap !== undefined ? [tap.note('PRIVMSG')] : []),
          logTakeovers(takeoversFromLogs(f, t0, { from: chaosStart - t0, until: chaosStart + chaosMs - t0 })),
          `Herald observers in NAMES during the chaos (the watcher asks every second per channel): ${names.samples} answers, ${names.one} with one, ${names.none} with none (handovers, InspIRCd down), ${names.twoAtOnce.length} with two or more${whileStalled.length > 0 ? ` (and ${whileStalled.length} more while a process was stopped or just continued: not counted)` : ''}${names.nicks.length > 0 ? ` (nicks seen: ${names.nicks.join(', ')})` : ''}`,
          `InspIRCd: SIGKILLed and restarted ${ircdRestarted.length}× (${ircdRestarted.map((r) => `${(r.at / 1000).toFixed(1)}s into the chaos, down ${(r.downMs / 1000).toFixed(1)}s`).join('; ')})`,
          `watcher: ${w.conns.length} connections, ${seenLines} PRIVMSGs read (${w.lines.filter((l) => l.replayed).length} replayed by the server's history on JOIN), ${k.messages} distinct lines`,
          `final states: delivered ${verdict.states['delivered'] ?? 0}, unconfirmed ${verdict.states['unconfirmed'] ?? 0}, failed ${verdict.states['failed'] ?? 0}, pending ${verdict.states['pending'] ?? 0}, missing ${verdict.states['missing'] ?? 0}; failed-but-sent ${k.failedButSent}, orphan lines ${k.orphans}`,
          `not judged for loss: ${verdict.unjudged.length} delivered sends with a line the watcher could not have read (it went out in a server run the watcher was not in the channel for, or after the last line it read before that run's server was killed)${verdict.unjudged.length > 0 ? `: ${verdict.unjudged.slice(0, 8).join('; ')}${verdict.unjudged.length > 8 ? ' …' : ''}` : ''}`,
          ...verdict.failedNotes.slice(0, 8).map((n) => `  - ${n}`),
          connectorLine(stats),
        ],
      };
      log(`verdict: ${violationCount === 0 ? 'no violations' : `${violationCount} VIOLATIONS`}`);
      return result;
    } finally {
      clearInterval(progress);
      acting = false;
      following = false;
    }
  } finally {
    c.signal?.removeEventListener('abort', onAbort);
    await takeoverWatch?.stop();
    await stale?.stop();
    plan?.close();
    await tap?.close();
    watcher?.stop();
    fleet?.halt();
    await fleet?.stopAll();
    await ircd?.dispose().catch(() => undefined);
    await discord.close();
  }
}

interface IrcdRestart {
  at: number;
  downMs: number;
}

/** When the InspIRCd is killed (ms into the chaos) and how long it stays down: from the seed. */
function ircdRestarts(rng: Rng, durationMs: number): IrcdRestart[] {
  const count = Math.max(1, Math.round(durationMs / IRCD_RESTART_EVERY_MS));
  const slot = durationMs / count;
  return Array.from({ length: count }, (_, k) => ({ at: slot * k + slot * rng.float(0.25, 0.7), downMs: rng.int(IRCD_DOWN_MS[0], IRCD_DOWN_MS[1]) }));
}

/** SIGKILL the InspIRCd at each planned time and start it again on the same port; answers the restarts done. */
async function runIrcdRestarts(ircd: Ircd, plan: IrcdRestart[], start: number, running: () => boolean, log: (line: string) => void): Promise<IrcdRestart[]> {
  const done: IrcdRestart[] = [];
  for (const r of plan) {
    const wait = start + r.at - Date.now();
    if (wait > 0 && !(await sleepWhile(wait, running))) break;
    if (!running()) break;
    log(`InspIRCd: SIGKILL, down for ${(r.downMs / 1000).toFixed(1)}s`);
    await ircd.stop();
    await sleep(r.downMs);
    for (let attempt = 0; ; attempt++) {
      try {
        await ircd.start();
        break;
      } catch (err) {
        if (attempt >= 10) throw err;
        log(`  InspIRCd did not start (${String(err).slice(0, 160)}); retrying`);
        await sleep(300);
      }
    }
    log('InspIRCd: up again (channels and history wiped)');
    done.push(r);
  }
  return done;
}

/**
 * The same handovers read from the processes' own logs ("holding the IRC connections", "lost the
 * IRC lease", their ends): every SIGKILL of the holder during the chaos, and when the next process
 * said it holds the connections: the lease's handovers (takeover.ts) told by Herald itself.
 */
function takeoversFromLogs(fleet: Fleet, t0: number, chaos: { from: number; until: number }): { killedAt: number; from: string; to: string | undefined; tookMs: number | undefined; standbyUp: boolean }[] {
  const events: { at: number; pid: number; member: string; what: 'acquired' | 'lost' | 'ended' }[] = [];
  for (const inc of fleet.incarnations) {
    if (inc.pid === undefined) continue;
    for (const line of inc.output().split('\n')) {
      const what = line.includes('"msg":"holding the IRC connections"') ? 'acquired' : line.includes('"msg":"lost the IRC lease') ? 'lost' : undefined;
      if (what !== undefined) events.push({ at: Number(/"time":([0-9]+)/.exec(line)?.[1] ?? 0) - t0, pid: inc.pid, member: inc.member, what });
    }
    if (inc.endedAt !== undefined && inc.end?.killed === true) events.push({ at: inc.endedAt, pid: inc.pid, member: inc.member, what: 'ended' });
  }
  events.sort((a, b) => a.at - b.at);
  const out: { killedAt: number; from: string; to: string | undefined; tookMs: number | undefined; standbyUp: boolean }[] = [];
  // Up at a time: said "herald started" by then, and not ended.
  const upAt = (at: number, except: number) =>
    fleet.incarnations.some((inc) => {
      if (inc.pid === except || (inc.endedAt !== undefined && inc.endedAt <= at)) return false;
      const line = inc.output().split('\n').find((l) => l.includes('"msg":"herald started"'));
      return line !== undefined && Number(/"time":([0-9]+)/.exec(line)?.[1] ?? Infinity) - t0 <= at;
    });
  let holder: { pid: number; member: string } | undefined;
  for (const [i, e] of events.entries()) {
    if (e.what === 'acquired') holder = { pid: e.pid, member: e.member };
    else if (holder?.pid === e.pid) {
      if (e.what === 'ended' && e.at >= chaos.from && e.at <= chaos.until) {
        const next = events.slice(i + 1).find((x) => x.what === 'acquired' && x.pid !== e.pid);
        out.push({ killedAt: e.at, from: e.member, to: next?.member, tookMs: next === undefined ? undefined : next.at - e.at, standbyUp: upAt(e.at, e.pid) });
      }
      holder = undefined;
    }
  }
  return out;
}

function logTakeovers(list: ReturnType<typeof takeoversFromLogs>): string {
  const done = list.flatMap((h) => (h.tookMs === undefined ? [] : [h.tookMs]));
  const withStandby = list.flatMap((h) => (h.tookMs !== undefined && h.standbyUp ? [h.tookMs] : []));
  const each = list.map((h) => `${h.from} killed at ${(h.killedAt / 1000).toFixed(1)}s → ${h.to ?? 'nobody'}${h.tookMs !== undefined ? ` in ${Math.round(h.tookMs)} ms` : ''}${h.standbyUp ? '' : ' (no other process was up: the time includes a start-up)'}`);
  return `  the same from the processes' own logs ("holding the IRC connections" after the holder's SIGKILL): ${done.length > 0 ? `${Math.round(Math.max(...done))} ms (max)` : '-'} over ${done.length} handovers; with another process up at the kill: ${withStandby.length > 0 ? `${Math.round(Math.max(...withStandby))} ms (max)` : '-'} over ${withStandby.length}${each.length > 0 ? `: ${each.join('; ')}` : ''}`;
}

function namesSummary(w: IrcWatcher, window: { from: number; until: number }): { samples: number; one: number; none: number; twoAtOnce: { at: number; channel: string; heralds: string[] }[]; nicks: string[] } {
  const inWindow = w.names.filter((s) => s.at >= window.from && s.at <= window.until);
  return {
    samples: inWindow.length,
    one: inWindow.filter((s) => s.heralds.length === 1).length,
    none: inWindow.filter((s) => s.heralds.length === 0).length,
    twoAtOnce: inWindow.filter((s) => s.heralds.length > 1),
    nicks: [...new Set(inWindow.flatMap((s) => s.heralds))].sort(),
  };
}

/** GET every send from an API-only Herald (nothing changes while we look). */
async function chatFinals(url: string, token: string, ids: string[]): Promise<Map<string, ChatFinal>> {
  return readFinals(url, token, ids, (id) => `/mcp/chat/messages/${id}`, (body) => ({ status: 200, state: body as ChatStateJson }));
}

/** What Herald's processes did with IRC and its lease, and what they could not store, start-ups and ends, between two times. */
const IRC_MESSAGES = /"msg":"(herald started|[^"]*IRC[^"]*|database connection lost[^"]*)"/;

function ircLines(fleet: Fleet, t0: number, fromMs: number, untilMs: number): string[] {
  const out: { at: number; line: string }[] = [];
  for (const inc of fleet.incarnations) {
    const who = `${inc.member}#${inc.pid ?? '-'}`;
    out.push({ at: inc.startedAt, line: `${who} spawned` });
    for (const line of inc.output().split('\n')) {
      const msg = IRC_MESSAGES.exec(line);
      if (msg === null) continue;
      const err = /"err":"([^"]{0,160})/.exec(line)?.[1];
      const channel = /"channel":"([^"]{0,60})/.exec(line)?.[1];
      out.push({ at: Number(/"time":([0-9]+)/.exec(line)?.[1] ?? 0) - t0, line: `${who} ${msg[1] ?? ''}${channel !== undefined ? ` ${channel}` : ''}${err !== undefined ? `: ${err}` : ''}` });
    }
    if (inc.endedAt !== undefined) out.push({ at: inc.endedAt, line: `${who} ended (${inc.end?.killed === true ? 'killed by the campaign' : 'by itself'})` });
  }
  const lines = out
    .filter((x) => x.at >= fromMs && x.at <= untilMs)
    .sort((a, b) => a.at - b.at)
    .map((x) => `${(x.at / 1000).toFixed(2)}s ${x.line}`);
  return lines.length > 60 ? [...lines.slice(0, 30), `… ${lines.length - 60} more …`, ...lines.slice(-30)] : lines;
}

function summarizeOpen(open: TrackedChat[]): string {
  const by: Record<string, number> = {};
  for (const t of open) {
    // The state and, for a pending send, Herald's reason (a retry's failure, or the final check).
    const state = t.last?.state ?? (t.accepted ? 'accepted' : 'unacknowledged');
    const key = t.last?.reason !== undefined && state === 'pending' ? `${state}: ${t.last.reason.slice(0, 120)}` : state;
    by[key] = (by[key] ?? 0) + 1;
  }
  return Object.entries(by)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
}

function progressLine(ledger: Map<string, TrackedChat>, w: IrcWatcher, fleet: Fleet): string {
  const all = [...ledger.values()];
  const ended = all.filter((t) => ChatConnector.settled(t)).length;
  return `progress: ${all.length} sends (${all.filter((t) => t.accepted).length} accepted, ${ended} ended), watcher read ${w.lines.length} lines${w.present ? '' : ' (reconnecting)'}, ${fleet.kills} kills, ${fleet.crashes.length} crashes, ${fleet.serveUrls().length} serve up`;
}
