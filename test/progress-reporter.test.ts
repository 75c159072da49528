import { describe, expect, it } from 'vitest';
import { elapsed, progressLine } from './support/progress-reporter.js';

// What `npm test` prints as each file finishes (test/support/progress-reporter.ts, a reporter of vitest.config.ts).

describe("npm test's progress lines", () => {
  it('say how many files are done of how many, which one, its outcome and time, and the time so far', () => {
    expect(progressLine(7, 170, 'test/chat.test.ts', 'passed', 9_140, 250_300)).toBe('[  7/170 files] test/chat.test.ts  passed in 9.1 s  (4 min 10 s so far)');
    expect(progressLine(170, 170, 'test/irc.test.ts', 'failed', 61_000, 1_554_000)).toBe('[170/170 files] test/irc.test.ts  failed in 1 min 01 s  (25 min 54 s so far)');
    expect(elapsed(0)).toBe('0.0 s');
  });

  it('are printed by the reporter vitest.config.ts names', async () => {
    const config = (await import('../vitest.config.js')).default as { test?: { reporters?: unknown[] } };
    expect(config.test?.reporters).toContain('./test/support/progress-reporter.ts');
  });
});
