import { afterAll, describe, expect, it } from 'vitest';
import { runCampaign, type CampaignResult } from './chaos/campaign.js';
import { formatDetails, formatTable, formatUndecided, formatViolations } from './chaos/report.js';

/**
 * A short run of the chaos campaign (`npm run chaos` runs the long one): real Herald processes on a
 * throwaway PostgreSQL cluster, SIGKILLs, a PostgreSQL restart and Discord faults, then exactly one
 * message per delivery. A fixed seed, so a failure replays with `npm run chaos -- --seed 20261130`.
 */

const SEED = 20261130;

// Its throwaway PostgreSQL server (initdb, pg_ctl) is required: without the binaries
// startPgCluster throws and this test fails, as pg-cluster.test.ts and pg-restart.test.ts do.
describe('chaos campaign (short, fixed seed)', () => {
  const abort = new AbortController();
  let running: Promise<CampaignResult> | undefined;
  const lines: string[] = [];

  // Also after a timeout: stop the campaign and wait until its processes, cluster and folders are gone.
  afterAll(async () => {
    abort.abort(new Error('test over'));
    await running?.catch(() => undefined);
  }, 120_000);

  it('every delivery ends in exactly one Discord message, through kills, a PostgreSQL restart and Discord faults', async () => {
    running = runCampaign({ seed: SEED, durationS: 6, processes: 3, connectors: 2, settleS: 25, signal: abort.signal, log: (l) => lines.push(l) });
    const result = await running;
    const undecided = formatUndecided(result);
    const report = `${formatTable(result)}\n\n${formatDetails(result)}${undecided !== '' ? `\n\n${undecided}` : ''}`;
    console.log(`chaos (seed ${SEED}):\n${report}`);
    if (result.violations > 0) console.log(`${formatViolations(result)}\n\n${lines.join('\n')}`);
    expect(result.phases.map((p) => p.counts.deliveries).every((n) => n > 0), report).toBe(true);
    expect(result.violations, report).toBe(0);
  }, 240_000);
});
