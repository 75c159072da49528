import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PHASES } from './chaos/campaign.js';
import { SMOKE_GROUPS, phasesWithoutGroup } from './chaos/smoke.js';

/**
 * The chaos smoke run is split over several files (test/chaos/smoke.ts); this walk keeps the split
 * whole: every phase of the campaign is in exactly one group, and every group runs from exactly
 * one test file, so a new phase or group cannot drop out of `npm test`.
 */
describe('the chaos smoke groups', () => {
  it('put every campaign phase in exactly one group', () => {
    expect(phasesWithoutGroup()).toEqual([]);
    const grouped = Object.values(SMOKE_GROUPS).flat();
    expect(grouped.toSorted()).toEqual([...PHASES].toSorted());
  });

  it('run each group from exactly one test file, test/chaos-<group>.test.ts', () => {
    const dir = path.join(import.meta.dirname);
    const calls = readdirSync(dir)
      .filter((f) => f.endsWith('.test.ts'))
      .flatMap((f) => [...readFileSync(path.join(dir, f), 'utf8').matchAll(/^chaosSmoke\('([^']+)'\);$/gm)].map((m) => ({ file: f, group: m[1] })));
    expect(calls.map((c) => c.group).toSorted()).toEqual(Object.keys(SMOKE_GROUPS).toSorted());
    for (const c of calls) expect(c.file).toBe(`chaos-${c.group}.test.ts`);
  });
});
