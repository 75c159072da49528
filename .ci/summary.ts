/**
 * The end of CI's test run: reads each pass's JSON report (vitest's json reporter) and times
 * (.ci/file-times.ts), prints the slowest files against the per-file budget and the
 * `Tests: N passed, F failed, S skipped` line, and exits 1 when a test failed, a file failed outside
 * its tests, a test skipped that may not, or the two passes together took longer than the budget:
 *
 * - on the PGlite pass, only the PostgreSQL-only tests skip: those the source marks
 *   `it.skipIf(!onPostgres)` / `runIf(onPostgres)` (test/support/db.ts: onPostgres is true when
 *   TEST_DATABASE_URL is set), every one of them, and nothing else;
 * - on the PostgreSQL pass nothing skips, and every PostgreSQL-only test passed there.
 *
 * A missing tool (InspIRCd, Chromium, promtool) makes its tests skip: that fails here, by name.
 *
 * The budgets (the numbers .ci/run's header states): each file should take at most
 * FILE_BUDGET_S of wall time on one pass (a file over it is listed, not failed: split it, share
 * its Herald, shorten what it waits); the two passes' wall times together at most
 * TOTAL_BUDGET_S, or CI fails, naming the slowest files. HERALD_CI_TEST_BUDGET_S overrides the
 * total (a slower machine), and says so in the output.
 *
 * Usage: tsx .ci/summary.ts <pglite.json> <pglite-times.json> <postgres.json> <postgres-times.json>
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { FileTime, PassTimes } from './file-times.js';

interface Assertion {
  ancestorTitles: string[];
  fullName: string;
  status: string;
  title: string;
}
interface FileResult {
  name: string;
  status: string;
  message: string;
  assertionResults: Assertion[];
}
interface Report {
  numPassedTests: number;
  numFailedTests: number;
  testResults: FileResult[];
}

/** A test or describe block the source marks as PostgreSQL-only. */
export interface PostgresOnly {
  file: string;
  kind: 'describe' | 'test';
  title: string;
}

const PG_ONLY = /\b(describe|it|test)(?:\.\w+)*\.(?:skipIf\(\s*!\s*onPostgres\s*\)|runIf\(\s*onPostgres\s*\))\(\s*(['"`])((?:\\.|(?!\2).)*)\2/g;

/** Every PostgreSQL-only block under `dir`, from the source. */
export function postgresOnly(root: string, dir = 'test'): PostgresOnly[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.test.ts'))
    .flatMap((e) => {
      const file = path.relative(root, path.join(e.parentPath, e.name)).split(path.sep).join('/');
      return [...readFileSync(path.join(root, file), 'utf8').matchAll(PG_ONLY)].map((m) => ({
        file,
        kind: m[1] === 'describe' ? ('describe' as const) : ('test' as const),
        title: (m[3] as string).replace(/\\(.)/g, '$1'),
      }));
    });
}

export interface Tally {
  passed: number;
  failed: number;
  skipped: number;
  /** Skips on the PGlite pass, and how many PostgreSQL-only tests ran on the PostgreSQL pass. */
  liteSkipped: number;
  liteExpected: number;
  postgresSkipped: number;
  problems: string[];
}

interface Named {
  file: string;
  test: Assertion;
}

function named(root: string, report: Report, status: (s: string) => boolean): Named[] {
  return report.testResults.flatMap((f) => f.assertionResults.filter((a) => status(a.status)).map((test) => ({ file: path.relative(root, f.name), test })));
}

const isSkip = (s: string): boolean => s === 'skipped' || s === 'pending' || s === 'todo';
const label = (n: Named): string => `${n.file} > ${n.test.fullName}`;
const covers = (marks: PostgresOnly[], n: Named): boolean =>
  marks.some((m) => m.file === n.file && (m.kind === 'test' ? m.title === n.test.title : n.test.ancestorTitles.includes(m.title)));

/** Check both passes; `problems` says what is wrong, naming the tests. */
export function check(root: string, pglite: Report, postgres: Report, marks: PostgresOnly[]): Tally {
  const problems: string[] = [];
  for (const [pass, report] of [['PGlite', pglite], ['PostgreSQL', postgres]] as const) {
    for (const f of report.testResults) {
      if (f.status === 'failed' && f.assertionResults.every((a) => a.status !== 'failed')) problems.push(`${pass}: ${path.relative(root, f.name)} failed outside its tests: ${f.message}`);
    }
    for (const n of named(root, report, (s) => s === 'failed')) problems.push(`${pass}: failed: ${label(n)}`);
  }
  const liteSkips = named(root, pglite, isSkip);
  for (const n of liteSkips.filter((n) => !covers(marks, n))) problems.push(`PGlite: skipped, and not a PostgreSQL-only test: ${label(n)}`);
  const expected = named(root, postgres, () => true).filter((n) => covers(marks, n));
  for (const n of expected.filter((e) => !liteSkips.some((s) => s.file === e.file && s.test.fullName === e.test.fullName))) problems.push(`PGlite: ran a PostgreSQL-only test: ${label(n)}`);
  for (const n of named(root, postgres, isSkip)) problems.push(`PostgreSQL: skipped: ${label(n)}`);
  for (const m of marks.filter((m) => !expected.some((n) => covers([m], n)))) problems.push(`PostgreSQL: the PostgreSQL-only ${m.kind} "${m.title}" (${m.file}) did not run`);
  const passed = pglite.numPassedTests + postgres.numPassedTests;
  const failed = pglite.numFailedTests + postgres.numFailedTests;
  const postgresSkipped = named(root, postgres, isSkip).length;
  if (passed === 0) problems.push('no test passed');
  return { passed, failed, skipped: liteSkips.length + postgresSkipped, liteSkipped: liteSkips.length, liteExpected: expected.length, postgresSkipped, problems };
}

/** A file's wall time on one pass should stay under this (seconds); those over it are listed. */
export const FILE_BUDGET_S = 60;
/** Both test passes' wall times together (seconds): past this CI fails. */
export const TOTAL_BUDGET_S = 1_400;

const line = (t: FileTime): string => `${(t.ms / 1000).toFixed(1).padStart(7)} s  ${t.file}`;

/** The `count` slowest files of one pass, one line each. */
export function slowest(times: FileTime[], count: number): string[] {
  return [...times].sort((a, b) => b.ms - a.ms).slice(0, count).map(line);
}

/** What the budgets say about the passes: lines to print, and the problem when the total is over. */
export function budgets(passes: { pass: string; times: PassTimes }[], totalBudgetS = TOTAL_BUDGET_S, fileBudgetS = FILE_BUDGET_S): { lines: string[]; problem: string | undefined } {
  const lines: string[] = [];
  for (const { pass, times } of passes) {
    const over = times.files.filter((t) => t.ms > fileBudgetS * 1000).sort((a, b) => b.ms - a.ms);
    lines.push(`== over the per-file budget (${fileBudgetS} s), ${pass} pass: ${over.length} file(s)${over.length > 0 ? '' : ', none'}`);
    lines.push(...over.map(line));
  }
  const totalS = passes.reduce((s, p) => s + p.times.wallMs, 0) / 1000;
  const walls = passes.map((p) => `${p.pass} ${(p.times.wallMs / 1000).toFixed(0)} s`).join(' + ');
  lines.push(`== test wall time: ${walls} = ${totalS.toFixed(0)} s of a ${totalBudgetS} s budget`);
  if (totalS <= totalBudgetS) return { lines, problem: undefined };
  const worst = passes.flatMap((p) => p.times.files.map((f) => ({ ...f, file: `${f.file} (${p.pass})` }))).sort((a, b) => b.ms - a.ms).slice(0, 5);
  return {
    lines,
    problem:
      `the test passes took ${totalS.toFixed(0)} s together, over the ${totalBudgetS} s budget (.ci/run's header): ` +
      `make the slowest files cheaper (a Herald and a sandbox per file, not per test; shorter waits; a smaller campaign), ` +
      `slowest: ${worst.map((w) => `${w.file} ${(w.ms / 1000).toFixed(0)} s`).join(', ')}`,
  };
}

/** The total budget: TOTAL_BUDGET_S, or HERALD_CI_TEST_BUDGET_S when set (a whole number of seconds). */
export function totalBudget(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env['HERALD_CI_TEST_BUDGET_S'];
  if (raw === undefined || raw === '') return TOTAL_BUDGET_S;
  if (!/^[1-9][0-9]*$/.test(raw)) throw new Error(`HERALD_CI_TEST_BUDGET_S must be a whole number of seconds, not ${JSON.stringify(raw)}`);
  return Number(raw);
}

function main(args: string[]): number {
  const [litePath, liteTimes, pgPath, pgTimes] = args;
  if (litePath === undefined || liteTimes === undefined || pgPath === undefined || pgTimes === undefined) throw new Error('usage: summary.ts <pglite.json> <pglite-times.json> <postgres.json> <postgres-times.json>');
  const root = process.cwd();
  const read = <T>(p: string): T => JSON.parse(readFileSync(p, 'utf8')) as T;
  const out = (text: string): boolean => process.stdout.write(`${text}\n`);
  const passes = ([['PGlite', liteTimes], ['PostgreSQL', pgTimes]] as const).map(([pass, p]) => ({ pass, times: read<PassTimes>(p) }));
  for (const { pass, times } of passes) {
    out(`== slowest files, ${pass} pass (${times.files.length} files, ${(times.wallMs / 1000).toFixed(0)} s wall, ${(times.files.reduce((s, t) => s + t.ms, 0) / 1000).toFixed(0)} s summed over workers)`);
    for (const text of slowest(times.files, 10)) out(text);
  }
  const budget = totalBudget();
  if (budget !== TOTAL_BUDGET_S) out(`the total budget is ${budget} s (HERALD_CI_TEST_BUDGET_S), not the ${TOTAL_BUDGET_S} s .ci/run states`);
  const held = budgets(passes, budget);
  for (const text of held.lines) out(text);
  const marks = postgresOnly(root);
  const tally = check(root, read<Report>(litePath), read<Report>(pgPath), marks);
  out(`skipped on the PGlite pass: ${tally.liteSkipped}, expected ${tally.liteExpected} (the PostgreSQL-only tests, ${marks.length} mark(s) in the source)`);
  out(`skipped on the PostgreSQL pass: ${tally.postgresSkipped}, expected 0`);
  const problems = [...tally.problems, ...(held.problem !== undefined ? [held.problem] : [])];
  for (const p of problems) out(`FAIL ${p}`);
  out(`Tests: ${tally.passed} passed, ${tally.failed} failed, ${tally.skipped} skipped`);
  return problems.length === 0 && tally.failed === 0 ? 0 : 1;
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]).endsWith(path.join('.ci', 'summary.ts'))) process.exitCode = main(process.argv.slice(2));
