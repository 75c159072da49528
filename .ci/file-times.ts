/**
 * A vitest reporter that writes each test file's wall time (import, setup, tests and hooks) as JSON
 * to the file HERALD_FILE_TIMES names, for .ci/summary.ts to list the slowest files. The JSON
 * reporter's per-file times start at the first test, so they leave out a file's beforeAll.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

export interface FileTime {
  file: string;
  ms: number;
}

export default class FileTimes implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const out = process.env['HERALD_FILE_TIMES'];
    if (out === undefined || out === '') return;
    const times: FileTime[] = modules.map((m) => {
      const d = m.diagnostic();
      return { file: path.relative(process.cwd(), m.moduleId), ms: Math.round(d.prepareDuration + d.setupDuration + d.collectDuration + d.duration) };
    });
    writeFileSync(out, JSON.stringify(times));
  }
}
