/**
 * A vitest reporter for CI: when HERALD_CI_RESULTS names a folder, it writes there, for each store
 * the run used (a run of both, vitest.config.ts, uses both), `<store>.json`: each file's tests and
 * their states (the shape of vitest's json reporter, which cannot tell the two stores' runs of one
 * file apart), and `<store>-times.json`: each file's wall time (import, setup, tests and hooks; the
 * json reporter's start at the first test, leaving out a file's beforeAll) and the run's wall time.
 * .ci/summary.ts reads them to list the slowest files, hold the budgets and check the skips;
 * .ci/expected-times.ts rewrites the order files start in from the times.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Reporter, TestCase, TestModule } from 'vitest/node';

export type Store = 'pglite' | 'postgres';

export interface FileTime {
  file: string;
  ms: number;
}

/** One store's file times, and the wall time of the whole run they were part of. */
export interface PassTimes {
  wallMs: number;
  files: FileTime[];
}

export interface Assertion {
  ancestorTitles: string[];
  fullName: string;
  status: string;
  title: string;
}
export interface FileResult {
  name: string;
  status: string;
  message: string;
  assertionResults: Assertion[];
}
/** One store's tests. */
export interface Report {
  numPassedTests: number;
  numFailedTests: number;
  testResults: FileResult[];
}

/** The store a file ran on: its project's TEST_DATABASE_URL (vitest.config.ts), else the run's. */
function storeOf(m: TestModule): Store {
  const env = m.project.config.env as Record<string, string | undefined> | undefined;
  const url = env !== undefined && 'TEST_DATABASE_URL' in env ? env['TEST_DATABASE_URL'] : process.env['TEST_DATABASE_URL'];
  return (url ?? '') === '' ? 'pglite' : 'postgres';
}

function assertion(test: TestCase): Assertion {
  const ancestorTitles: string[] = [];
  for (let p = test.parent; p.type === 'suite'; p = p.parent) ancestorTitles.unshift(p.name);
  const state = test.result().state;
  return { ancestorTitles, fullName: [...ancestorTitles, test.name].join(' '), status: state, title: test.name };
}

function fileResult(m: TestModule): FileResult {
  const assertionResults = [...m.children.allTests()].map(assertion);
  const state = m.state();
  const status = state === 'failed' || assertionResults.some((a) => a.status === 'failed') ? 'failed' : state === 'skipped' ? 'skipped' : 'passed';
  return { name: m.moduleId, status, message: m.errors().map((e) => e.message).join('\n'), assertionResults };
}

export default class Results implements Reporter {
  private startedAt = Date.now();

  onInit(): void {
    this.startedAt = Date.now();
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const dir = process.env['HERALD_CI_RESULTS'];
    if (dir === undefined || dir === '') return;
    mkdirSync(dir, { recursive: true });
    const wallMs = Date.now() - this.startedAt;
    for (const store of ['pglite', 'postgres'] as const) {
      const mine = modules.filter((m) => storeOf(m) === store);
      if (mine.length === 0) continue;
      const files: FileTime[] = mine.map((m) => {
        const d = m.diagnostic();
        return { file: path.relative(process.cwd(), m.moduleId), ms: Math.round(d.prepareDuration + d.setupDuration + d.collectDuration + d.duration) };
      });
      const testResults = mine.map(fileResult);
      const count = (status: string) => testResults.reduce((n, f) => n + f.assertionResults.filter((a) => a.status === status).length, 0);
      const report: Report = { numPassedTests: count('passed'), numFailedTests: count('failed'), testResults };
      const times: PassTimes = { wallMs, files };
      writeFileSync(path.join(dir, `${store}.json`), JSON.stringify(report));
      writeFileSync(path.join(dir, `${store}-times.json`), JSON.stringify(times));
    }
  }
}
