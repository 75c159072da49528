import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PHASES, type PhaseName } from './phases.js';
import { randomSeed } from './prng.js';
import { announceEstimate, formatDuration, intFlag, refuse, scriptArgs } from '../support/script-args.js';
import { formatDetails, formatKinds, formatTable, formatTakeovers, formatUndecided, formatViolations } from './report.js';

/**
 * `npm run chaos [-- --seed N --duration S --processes N --connectors N --settle S --phase NAME]`:
 * the chaos campaign (test/chaos/campaign.ts). Exit 0: no violation; 1: violations; 2: the
 * campaign itself failed; 130: interrupted.
 */

const USAGE = `usage: npm run chaos -- [--seed N] [--duration S] [--processes N] [--connectors N] [--settle S] [--phase ${PHASES.join('|')}]
  --seed N        replay a run (default: random, printed first)
  --duration S    seconds of chaos per phase (default 60)
  --processes N   Herald processes per phase, half serve and half dispatch (default 4)
  --connectors N  simulated connectors (default 3)
  --settle S      at most this long to settle after the chaos, per phase (default 40)
  --phase NAME    run only this phase (repeatable; default all). default-window and
                  short-window: posts, DMs and edits on Discord under two nonce windows
                  (default-window also files, reactions and deletes, and two bots:
                  each message from its agent's);
                  slack: posts to channels of a Slack sandbox, with Slack's faults;
                  discord-chat: chat lines and command replies on Discord;
                  irc-chat: chat lines on a throwaway InspIRCd, itself killed too;
                  handoffs: two bots handing tasks to each other;
                  archive: media scrapes killed mid-page;
                  pauses: Discord under the short window, processes SIGSTOPped past their
                  lease (at their fault points, at random, with a create in flight) and
                  continued 2–24 s after it; no SIGKILLs;
                  slack-pauses, irc-pauses: the same pauses in the slack and irc-chat
                  phases (a chat.postMessage or a PRIVMSG in flight);
                  partitions: Discord under the short window, replicas cut off from
                  PostgreSQL, from Discord or both (a TCP proxy each) and healed
  --nonce-windows SANDBOX_MS:HERALD_MS
                  the short-window phase's nonce windows: Discord's (the sandbox's) and
                  HERALD_NONCE_WINDOW_MS (default 4000:1000; Discord's must cover Herald's plus
                  HERALD_LEASE_MS, 3000, or even a correct Herald may duplicate)
  --dry-run       print how long the run would take and start nothing
  -h, --help      this help; starts nothing

It takes about 20 minutes at the defaults (each phase about --duration plus half of --settle plus
25 s); the estimate for the options given is printed first.`;

/** A rough estimate of one phase (measured: eleven phases at the defaults took 19 minutes): its chaos, part of its settling, and setting up and verifying. */
function phaseEstimateS(phase: PhaseName, durationS: number, settleS: number): number {
  // Slack's slower pace settles for at least 90 s.
  const settle = phase === 'slack' || phase === 'slack-pauses' ? Math.max(settleS, 90) : settleS;
  return durationS + settle / 2 + 25;
}

async function main(): Promise<number> {
  const values = scriptArgs('npm run chaos', USAGE, {
    seed: { type: 'string' },
    duration: { type: 'string' },
    processes: { type: 'string' },
    connectors: { type: 'string' },
    settle: { type: 'string' },
    phase: { type: 'string', multiple: true },
    'nonce-windows': { type: 'string' },
  });
  let seed: number, durationS: number, processes: number, connectors: number, settleS: number;
  try {
    seed = intFlag(values.seed, randomSeed(), 'seed');
    durationS = intFlag(values.duration, 60, 'duration', 1);
    processes = intFlag(values.processes, 4, 'processes', 2);
    connectors = intFlag(values.connectors, 3, 'connectors', 1);
    settleS = intFlag(values.settle, 40, 'settle', 1);
  } catch (err) {
    return refuse('npm run chaos', USAGE, (err as Error).message);
  }
  const windows = /^([0-9]+):([0-9]+)$/.exec(values['nonce-windows'] ?? '4000:1000');
  if (windows === null) refuse('npm run chaos', USAGE, '--nonce-windows must be SANDBOX_MS:HERALD_MS');
  const shortWindow = { sandboxMs: Number(windows[1]), heraldMs: Number(windows[2]) };
  const phases = (values.phase ?? [...PHASES]) as PhaseName[];
  const unknownPhase = phases.find((p) => !PHASES.includes(p));
  if (unknownPhase !== undefined) refuse('npm run chaos', USAGE, `unknown phase ${unknownPhase}`);

  const estimates = phases.map((p) => ({ phase: p, s: phaseEstimateS(p, durationS, settleS) }));
  announceEstimate(`about ${formatDuration(estimates.reduce((sum, e) => sum + e.s, 0))} (${estimates.map((e) => `${e.phase} ~${formatDuration(e.s)}`).join(', ')})`);
  console.log(`chaos campaign: seed ${seed}  (replay: npm run chaos -- --seed ${seed} --duration ${durationS} --processes ${processes} --connectors ${connectors} --settle ${settleS}${values.phase ? phases.map((p) => ` --phase ${p}`).join('') : ''}${values['nonce-windows'] ? ` --nonce-windows ${values['nonce-windows']}` : ''})`);
  const abort = new AbortController();
  let interrupts = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    interrupts += 1;
    if (interrupts > 1) {
      console.error(`${signal} again: exiting now (the watchdogs end Herald and PostgreSQL)`);
      process.exit(130);
    }
    console.error(`${signal}: stopping the campaign and cleaning up (again to exit at once)`);
    abort.abort(new Error(`interrupted by ${signal}`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    // Loaded only now: --help, --dry-run and a refused flag answer without the campaign's code.
    const { runCampaign } = await import('./campaign.js');
    const result = await runCampaign({ seed, durationS, processes, connectors, settleS, phases, shortWindow, signal: abort.signal });
    console.log('');
    console.log(`seed ${seed}: ${result.violations === 0 ? 'no violations' : `${result.violations} VIOLATIONS`} in ${(result.elapsedMs / 1000).toFixed(0)}s`);
    console.log('');
    console.log(formatTable(result));
    console.log('');
    for (const part of [formatKinds(result), formatTakeovers(result)]) {
      if (part === '') continue;
      console.log(part);
      console.log('');
    }
    console.log(formatDetails(result));
    const undecided = formatUndecided(result);
    if (undecided !== '') {
      console.log('');
      console.log(undecided);
    }
    if (result.violations > 0) {
      console.log('');
      console.log(formatViolations(result));
    }
    const file = path.join(tmpdir(), `herald-chaos-${seed}-${Date.now()}.json`);
    await writeFile(file, JSON.stringify(result, null, 2));
    console.log('');
    console.log(`full report (every violation with its messages, rows and Herald log lines): ${file}`);
    return result.violations === 0 ? 0 : 1;
  } catch (err) {
    if (abort.signal.aborted) {
      console.error('interrupted; cleaned up');
      return 130;
    }
    console.error(`the campaign itself failed (seed ${seed}):`, err);
    return 2;
  }
}

// Exit even if a keep-alive socket or timer lingers: everything the campaign started is gone by now.
process.exit(await main());
