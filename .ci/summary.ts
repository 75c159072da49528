/**
 * The end of CI's test run: reads each pass's JSON report (vitest's json reporter) and file times
 * (.ci/file-times.ts), prints the slowest files and the `Tests: N passed, F failed, S skipped` line,
 * and exits 1 when a test failed, a file failed outside its tests, or a test skipped that may not:
 *
 * - on the PGlite pass, only the PostgreSQL-only tests skip: those the source marks
 *   `it.skipIf(!onPostgres)` / `runIf(onPostgres)` (test/support/db.ts: onPostgres is true when
 *   TEST_DATABASE_URL is set), every one of them, and nothing else;
 * - on the PostgreSQL pass nothing skips, and every PostgreSQL-only test passed there.
 *
 * A missing tool (InspIRCd, Chromium, promtool) makes its tests skip: that fails here, by name.
 *
 * Usage: tsx .ci/summary.ts <pglite.json> <pglite-times.json> <postgres.json> <postgres-times.json>
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { FileTime } from './file-times.js';

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

/** The `count` slowest files of one pass, one line each. */
export function slowest(times: FileTime[], count: number): string[] {
  return [...times].sort((a, b) => b.ms - a.ms).slice(0, count).map((t) => `${(t.ms / 1000).toFixed(1).padStart(7)} s  ${t.file}`);
}

function main(args: string[]): number {
  const [litePath, liteTimes, pgPath, pgTimes] = args;
  if (pgTimes === undefined) throw new Error('usage: summary.ts <pglite.json> <pglite-times.json> <postgres.json> <postgres-times.json>');
  const root = process.cwd();
  const read = <T>(p: string): T => JSON.parse(readFileSync(p, 'utf8')) as T;
  const out = (line: string): boolean => process.stdout.write(`${line}\n`);
  for (const [pass, p] of [['PGlite', liteTimes], ['PostgreSQL', pgTimes]] as const) {
    const times = read<FileTime[]>(p);
    out(`== slowest files, ${pass} pass (${times.length} files, ${(times.reduce((s, t) => s + t.ms, 0) / 1000).toFixed(0)} s summed over workers)`);
    for (const line of slowest(times, 10)) out(line);
  }
  const marks = postgresOnly(root);
  const tally = check(root, read<Report>(litePath), read<Report>(pgPath), marks);
  out(`skipped on the PGlite pass: ${tally.liteSkipped}, expected ${tally.liteExpected} (the PostgreSQL-only tests, ${marks.length} mark(s) in the source)`);
  out(`skipped on the PostgreSQL pass: ${tally.postgresSkipped}, expected 0`);
  for (const p of tally.problems) out(`FAIL ${p}`);
  out(`Tests: ${tally.passed} passed, ${tally.failed} failed, ${tally.skipped} skipped`);
  return tally.problems.length === 0 && tally.failed === 0 ? 0 : 1;
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]).endsWith(path.join('.ci', 'summary.ts'))) process.exitCode = main(process.argv.slice(2));
