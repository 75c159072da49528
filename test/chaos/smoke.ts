import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { startPgCluster, type PgCluster } from '../support/pg-cluster.js';
import { PHASES, runCampaign, type CampaignResult, type PhaseName } from './campaign.js';
import { formatDetails, formatKinds, formatTable, formatTakeovers, formatUndecided, formatViolations } from './report.js';

/**
 * Short runs of the chaos campaign (`npm run chaos` runs the long one), one per phase: real Herald
 * processes on a throwaway PostgreSQL cluster, SIGKILLs, a PostgreSQL restart and the platform's
 * faults, then exactly one message (line, reply, handoff, stored item) for each piece of work. A
 * fixed seed, so a failure replays with `npm run chaos -- --seed 20261130 --phase <phase>`.
 *
 * The phases are split over a few test files (`test/chaos-<group>.test.ts`, one group each), so
 * the test runner spreads them over its workers instead of running some seven minutes of phases
 * in one file at the end of the suite. Every phase is in exactly one group: `SMOKE_GROUPS` is
 * checked against the campaign's phases and the files by test/chaos-smoke-groups.test.ts.
 */

export const SMOKE_SEED = 20261130;

/** Each group's phases, about 100–130 s of a busy 2-core machine each. */
export const SMOKE_GROUPS = {
  discord: ['default-window', 'short-window', 'pauses'],
  'discord-faults': ['partitions', 'discord-chat', 'handoffs'],
  slack: ['slack', 'slack-pauses'],
  'irc-archive': ['irc-chat', 'irc-pauses', 'archive'],
} as const satisfies Record<string, readonly PhaseName[]>;

export type SmokeGroup = keyof typeof SMOKE_GROUPS;

/** Every campaign phase that no group runs (empty, or a new phase was forgotten). */
export function phasesWithoutGroup(): PhaseName[] {
  const grouped = new Set<PhaseName>(Object.values(SMOKE_GROUPS).flat());
  return PHASES.filter((p) => !grouped.has(p));
}

/** The smoke run of one group's phases, in a describe of its own, on a throwaway cluster of its own. */
export function chaosSmoke(group: SmokeGroup): void {
  // Its throwaway PostgreSQL server (initdb, pg_ctl) is required: without the binaries
  // startPgCluster throws and this test fails, as pg-cluster.test.ts and pg-restart.test.ts do.
  describe(`chaos campaign, ${group} phases (short, fixed seed)`, () => {
    const abort = new AbortController();
    let running: Promise<CampaignResult> | undefined;
    // One throwaway cluster for the group's phases (each phase has its own database in it), as `npm run chaos` does.
    let cluster: PgCluster | undefined;
    beforeAll(async () => {
      cluster = await startPgCluster();
    }, 60_000);

    // Also after a timeout: stop the campaign and wait until its processes, cluster and folders are gone.
    afterAll(async () => {
      abort.abort(new Error('test over'));
      await running?.catch(() => undefined);
      await cluster?.destroy();
    }, 120_000);

    it.each(SMOKE_GROUPS[group] as readonly PhaseName[])('%s: every piece of work done exactly once, through kills, a PostgreSQL restart and faults', async (phase) => {
      const lines: string[] = [];
      // A phase that fails, also by running past its timeout, prints what it did up to then: the
      // campaign's own log (starts, kills, faults, progress), the evidence a stall leaves.
      onTestFailed(() => {
        console.log(`chaos ${phase} (seed ${SMOKE_SEED}) failed; its log:\n${lines.join('\n')}`);
      });
      running = runCampaign({ seed: SMOKE_SEED, durationS: 6, processes: 3, connectors: 2, settleS: 25, phases: [phase], signal: abort.signal, ...(cluster !== undefined ? { cluster } : {}), log: (l) => lines.push(l) });
      const result = await running;
      const undecided = formatUndecided(result);
      const report = [formatTable(result), formatKinds(result), formatTakeovers(result), formatDetails(result), undecided].filter((part) => part !== '').join('\n\n');
      console.log(`chaos ${phase} (seed ${SMOKE_SEED}):\n${report}`);
      if (result.violations > 0) console.log(formatViolations(result));
      expect(result.phases.map((p) => p.counts.deliveries).every((n) => n > 0), report).toBe(true);
      expect(result.violations, report).toBe(0);
    }, 240_000);
  });
}
