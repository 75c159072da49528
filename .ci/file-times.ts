/**
 * A vitest reporter that writes each test file's wall time (import, setup, tests and hooks), and
 * the whole pass's wall time, as JSON to the file HERALD_FILE_TIMES names, for .ci/summary.ts to
 * list the slowest files and hold the budgets. The JSON reporter's per-file times start at the
 * first test, so they leave out a file's beforeAll.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

export interface FileTime {
  file: string;
  ms: number;
}

/** What one pass wrote: its wall time from the run's start to its end, and each file's. */
export interface PassTimes {
  wallMs: number;
  files: FileTime[];
}

export default class FileTimes implements Reporter {
  private startedAt = Date.now();

  onInit(): void {
    this.startedAt = Date.now();
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const out = process.env['HERALD_FILE_TIMES'];
    if (out === undefined || out === '') return;
    const files: FileTime[] = modules.map((m) => {
      const d = m.diagnostic();
      return { file: path.relative(process.cwd(), m.moduleId), ms: Math.round(d.prepareDuration + d.setupDuration + d.collectDuration + d.duration) };
    });
    const times: PassTimes = { wallMs: Date.now() - this.startedAt, files };
    writeFileSync(out, JSON.stringify(times));
  }
}
