import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { budgets, FILE_BUDGET_S, TOTAL_BUDGET_S, totalBudget } from '../.ci/summary.js';
import { classifyTestFiles, POSTGRES_ONLY, STORE_BEHAVIOUR } from '../.ci/test-files.js';
import { expectedTimes } from './support/sequencer.js';

// CI's time budgets (.ci/run's header): files over the per-file budget are listed, and the two test
// passes together past the total budget fail the run, naming the slowest files.
describe('the CI time budgets', () => {
  const pass = (pass: string, wallS: number, files: [string, number][]) => ({ pass, times: { wallMs: wallS * 1000, files: files.map(([file, s]) => ({ file, ms: s * 1000 })) } });

  it('lists the files over the per-file budget, slowest first, and passes within the total', () => {
    const { lines, problem } = budgets([pass('PGlite', 400, [['test/a.test.ts', 30], ['test/b.test.ts', 95], ['test/c.test.ts', 61]]), pass('PostgreSQL', 200, [['test/a.test.ts', 20]])], 720, 60);
    expect(problem).toBeUndefined();
    expect(lines).toEqual([
      '== over the per-file budget (60 s), PGlite pass: 2 file(s)',
      '   95.0 s  test/b.test.ts',
      '   61.0 s  test/c.test.ts',
      '== over the per-file budget (60 s), PostgreSQL pass: 0 file(s), none',
      '== test wall time: PGlite 400 s + PostgreSQL 200 s = 600 s of a 720 s budget',
    ]);
  });

  it('fails past the total budget, naming the budget and the slowest files of both passes', () => {
    const { problem } = budgets([pass('PGlite', 600, [['test/a.test.ts', 30], ['test/b.test.ts', 95]]), pass('PostgreSQL', 200, [['test/d.test.ts', 120]])], 720, 60);
    expect(problem).toMatch(/^the test passes took 800 s together, over the 720 s budget/);
    expect(problem).toContain('slowest: test/d.test.ts (PostgreSQL) 120 s, test/b.test.ts (PGlite) 95 s, test/a.test.ts (PGlite) 30 s');
  });

  it('states its defaults, and the total may be set by HERALD_CI_TEST_BUDGET_S, a whole number of seconds', () => {
    expect([FILE_BUDGET_S, TOTAL_BUDGET_S]).toEqual([60, 1_400]);
    expect(totalBudget({})).toBe(1_400);
    expect(totalBudget({ HERALD_CI_TEST_BUDGET_S: '900' })).toBe(900);
    expect(() => totalBudget({ HERALD_CI_TEST_BUDGET_S: '15m' })).toThrow(/whole number of seconds/);
  });
});

// The PostgreSQL pass runs a subset (.ci/test-files.ts): a PostgreSQL-only test outside it would
// skip on both passes, and a listed file that no longer opens a store would run there for nothing.
describe('the files of the PostgreSQL pass', () => {
  const files = classifyTestFiles();

  it('holds every file with a PostgreSQL-only test or path, however the condition is spelled', () => {
    for (const file of [...files.storeDependent, ...files.storeIndependent]) {
      const source = readFileSync(file, 'utf8');
      // Any skipIf/runIf/if whose condition names the PostgreSQL switch must be a form POSTGRES_ONLY knows.
      for (const m of source.matchAll(/(?:\.skipIf|\.runIf|\bif)\s*\([^)]*\bonPostgres\b[^)]*\)/g)) {
        expect(POSTGRES_ONLY.test(m[0]), `${file}: ${m[0]}: spell the condition as one of the forms POSTGRES_ONLY (.ci/test-files.ts) knows`).toBe(true);
      }
      if (POSTGRES_ONLY.test(source)) expect(files.postgresPass, file).toContain(file);
    }
  });

  it('lists in STORE_BEHAVIOUR only files that exist and open a store', () => {
    for (const file of Object.keys(STORE_BEHAVIOUR)) expect(files.storeDependent, file).toContain(file);
    expect(files.postgresPass.length).toBeLessThan(files.storeDependent.length);
  });
});

// The runner starts the longest files first by .ci/expected-times.json (test/support/sequencer.ts):
// a file missing there would start at a guess, and an entry whose file is gone is noise.
describe('the expected times the runner orders files by', () => {
  it('name every test file, and only test files that exist, each with a whole number of seconds', () => {
    const files = classifyTestFiles();
    const times = expectedTimes(process.cwd());
    expect(Object.keys(times).toSorted(), 'a test file added or removed: run `npx tsx .ci/expected-times.ts <times.json>` (its header says how)').toEqual([...files.storeDependent, ...files.storeIndependent].toSorted());
    for (const [file, s] of Object.entries(times)) expect(Number.isInteger(s) && s >= 0, file).toBe(true);
  });
});
