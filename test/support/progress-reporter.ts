import type { Reporter, TestModule, TestSpecification, Vitest } from 'vitest/node';

// `npm test` takes many minutes: a line per test file as it finishes says how far the run is
// ("[12/170 files] test/chat.test.ts  passed in 9.1 s  (4 min 10 s so far)"). Beside vitest's own
// reporter (vitest.config.ts), whose summary comes only at the end when the output is not a terminal.

/** 4 min 10 s, 12.3 s. */
export function elapsed(ms: number): string {
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const whole = Math.floor(s);
  return `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, '0')} s`;
}

/** One finished file's line. */
export function progressLine(done: number, total: number, file: string, state: string, durationMs: number, sinceStartMs: number): string {
  const width = String(total).length;
  return `[${String(done).padStart(width)}/${total} files] ${file}  ${state} in ${elapsed(durationMs)}  (${elapsed(sinceStartMs)} so far)`;
}

export default class ProgressReporter implements Reporter {
  private log: (line: string) => void = (line) => console.log(line);
  private total = 0;
  private done = 0;
  private started = performance.now();

  onInit(vitest: Vitest): void {
    this.log = (line) => vitest.logger.log(line);
  }

  onTestRunStart(specifications: ReadonlyArray<TestSpecification>): void {
    this.total = new Set(specifications.map((s) => s.moduleId)).size;
    this.done = 0;
    this.started = performance.now();
    this.log(`${this.total} test files; a line as each finishes`);
  }

  onTestModuleEnd(testModule: TestModule): void {
    this.done += 1;
    this.log(progressLine(this.done, Math.max(this.total, this.done), testModule.relativeModuleId, testModule.state(), testModule.diagnostic().duration, performance.now() - this.started));
  }
}
