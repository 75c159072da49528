import { describe, expect, it } from 'vitest';
import { formatReport, runFuzz } from './fuzz/campaign.js';

/**
 * A short, fixed-seed slice of the fuzz campaign (`npm run fuzz` runs the full one): Herald's API
 * and the sandbox's control route. The sandbox's other routes and its gateway are left to the
 * full campaign (they have known failures in the sandbox itself: a malformed %-escape is a 500, a
 * `null` gateway frame ends the process).
 */
describe('fuzzing (fixed seeds)', () => {
  it.each([1, 2])('seed %i: no 5xx, contract-valid answers, no hang, no crash, no write on refusal', async (seed) => {
    const report = await runFuzz({ seed, runs: 150, groups: ['herald', 'control'], databaseUrl: process.env['TEST_DATABASE_URL'] || undefined });
    expect(report.sent).toBe(150);
    expect(report.violations, formatReport(report)).toEqual([]);
  });
});
