import { describe, expect, it } from 'vitest';
import type { CategoryGroup } from './fuzz/arbitraries.js';
import { formatReport, runFuzz } from './fuzz/campaign.js';

/**
 * A short, fixed-seed slice of the fuzz campaign (`npm run fuzz` runs the full one): the full
 * scope (Herald's API, the sandbox's control route, its other routes and its gateway) with two
 * seeds, and one seed on the sandbox's routes and gateway alone, so they get more than a handful
 * of requests (a malformed %-escape, a `null` or data-less IDENTIFY gateway frame, a bad history
 * cursor once brought the sandbox, and Herald's process with it, down or to a 500). The boundary
 * pass's short form is test/fuzz-boundary.test.ts (a file of its own, so the two run side by side).
 */
const SLICES: { seed: number; runs: number; scope: string; groups?: CategoryGroup[] }[] = [
  { seed: 1, runs: 150, scope: 'all groups' },
  { seed: 2, runs: 150, scope: 'all groups' },
  { seed: 3, runs: 60, scope: 'sandbox and gateway', groups: ['sandbox', 'gateway'] },
];

describe('fuzzing (fixed seeds)', () => {
  it.each(SLICES)('seed $seed, $runs requests ($scope): no 5xx, contract-valid answers, no hang, no crash, no write on refusal', async ({ seed, runs, groups }) => {
    const report = await runFuzz({ seed, runs, ...(groups !== undefined ? { groups } : {}), databaseUrl: process.env['TEST_DATABASE_URL'] || undefined });
    expect(report.sent).toBe(runs);
    expect(report.violations, formatReport(report)).toEqual([]);
    // A Herald process of its own and 60–150 requests: about 20 s alone, more on a busy machine.
  }, 150_000);
});
