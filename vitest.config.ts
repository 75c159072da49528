import { defineConfig } from 'vitest/config';
import { classifyTestFiles } from './.ci/test-files.js';
import LongestFirstSequencer from './test/support/sequencer.js';

// HERALD_TEST_STORE_ONLY=1 (CI's PostgreSQL pass): only the files that test what the PostgreSQL
// server does beyond the embedded store; the rest ran on the PGlite pass (see .ci/test-files.ts).
const storeOnly = process.env['HERALD_TEST_STORE_ONLY'] === '1';

export default defineConfig({
  test: {
    include: storeOnly ? classifyTestFiles().postgresPass : ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/setup.ts'],
    // A hang costs seconds. Files that start other processes (Herald, PostgreSQL, InspIRCd,
    // Chromium) get PROCESS_TIMEOUT_MS instead (test/support/setup.ts); a test or hook that
    // legitimately needs longer says so itself.
    testTimeout: 30_000,
    // A hook starting a test Herald (migrating a fresh store) was seen near 30 s on a loaded machine.
    hookTimeout: 60_000,
    // Crash tests spawn Herald processes; keep the 2-core machine from thrashing.
    maxWorkers: 2,
    // Each file in a process of its own (vitest's default, isolate: true). Sharing one (isolate: false)
    // saved a third of the CPU on a sample but not wall time on the suite (1,322 s against 1,318 s),
    // and a Discord client a file left reconnecting surfaced as another file's unhandled error.
    // The longest files first, by a measured pass's times (test/support/sequencer.ts).
    sequence: { sequencer: LongestFirstSequencer },
    // A line per finished file with the count and the time so far (test/support/progress-reporter.ts).
    reporters: ['default', './test/support/progress-reporter.ts'],
  },
});
