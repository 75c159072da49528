import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCampaign, type CampaignResult } from './chaos/campaign.js';
import { formatDetails, formatTable, formatUndecided, formatViolations } from './chaos/report.js';

/**
 * A short run of the chaos campaign (`npm run chaos` runs the long one): real Herald processes on a
 * throwaway PostgreSQL cluster, SIGKILLs, a PostgreSQL restart and Discord faults, then exactly one
 * message per delivery. A fixed seed, so a failure replays with `npm run chaos -- --seed 20261130`.
 */

const SEED = 20261130;

/** The campaign needs its own PostgreSQL server (initdb, pg_ctl), never the machine's shared one. */
function postgresBinaries(): boolean {
  const bins = process.env['PG_BIN'] ? [process.env['PG_BIN']] : existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').map((v) => path.join('/usr/lib/postgresql', v, 'bin')) : [];
  return bins.some((b) => existsSync(path.join(b, 'initdb')) && existsSync(path.join(b, 'pg_ctl')));
}
const available = postgresBinaries();

describe.skipIf(!available)('chaos campaign (short, fixed seed)', () => {
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

if (!available) {
  describe('chaos campaign', () => {
    it.skip('skipped: no PostgreSQL binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or $PG_BIN', () => undefined);
  });
}
