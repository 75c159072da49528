import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPgCluster, type PgCluster } from './support/pg-cluster.js';
import { PHASES, runCampaign, type CampaignResult, type PhaseName } from './chaos/campaign.js';
import { formatDetails, formatKinds, formatTable, formatTakeovers, formatUndecided, formatViolations } from './chaos/report.js';

/**
 * Short runs of the chaos campaign (`npm run chaos` runs the long one), one per phase: real Herald
 * processes on a throwaway PostgreSQL cluster, SIGKILLs, a PostgreSQL restart and the platform's
 * faults, then exactly one message (line, reply, handoff, stored item) for each piece of work. A
 * fixed seed, so a failure replays with `npm run chaos -- --seed 20261130 --phase <phase>`.
 */

const SEED = 20261130;

// Its throwaway PostgreSQL server (initdb, pg_ctl) is required: without the binaries
// startPgCluster throws and this test fails, as pg-cluster.test.ts and pg-restart.test.ts do.
describe('chaos campaign (short, fixed seed)', () => {
  const abort = new AbortController();
  let running: Promise<CampaignResult> | undefined;
  // One throwaway cluster for every phase (each phase has its own database in it), as `npm run chaos` does.
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

  it.each(PHASES as PhaseName[])('%s: every piece of work done exactly once, through kills, a PostgreSQL restart and faults', async (phase) => {
    const lines: string[] = [];
    running = runCampaign({ seed: SEED, durationS: 6, processes: 3, connectors: 2, settleS: 25, phases: [phase], signal: abort.signal, ...(cluster !== undefined ? { cluster } : {}), log: (l) => lines.push(l) });
    const result = await running;
    const undecided = formatUndecided(result);
    const report = [formatTable(result), formatKinds(result), formatTakeovers(result), formatDetails(result), undecided].filter((part) => part !== '').join('\n\n');
    console.log(`chaos ${phase} (seed ${SEED}):\n${report}`);
    if (result.violations > 0) console.log(`${formatViolations(result)}\n\n${lines.join('\n')}`);
    expect(result.phases.map((p) => p.counts.deliveries).every((n) => n > 0), report).toBe(true);
    expect(result.violations, report).toBe(0);
  }, 240_000);
});
