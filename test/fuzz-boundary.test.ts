import { describe, expect, it } from 'vitest';
import { formatBoundary, runBoundary } from './fuzz/boundary-mcp.js';

/**
 * The fuzzer's boundary pass, short form (`npm run fuzz` runs the full one after its seeded requests): each
 * field of every operation and MCP tool at the edges its contract allows and just past them.
 */
describe('the boundary pass (short form)', () => {
  it('every operation and MCP tool, each field at its largest pattern number and past it, 2^63, past maxLength, maxItems and maximum, NUL, a lone surrogate, an enum in upper case: no 5xx, no hang, refused naming the field, no write on refusal', async () => {
    const report = await runBoundary({ short: true, databaseUrl: process.env['TEST_DATABASE_URL'] || undefined });
    const walked = Object.keys(report.by);
    // Every operation of the served contract but the event stream, and every tool, were walked.
    expect(walked.filter((k) => !k.startsWith('tool ')).length).toBeGreaterThanOrEqual(40);
    expect(walked.filter((k) => k.startsWith('tool ')).length).toBeGreaterThanOrEqual(30);
    expect(report.violations, formatBoundary(report)).toEqual([]);
  }, 240_000);
});
