import { defineConfig } from 'vitest/config';
import { classifyTestFiles } from './.ci/test-files.js';
import { TEST_NODE_FLAGS } from './test/support/node-flags.js';
import LongestFirstSequencer from './test/support/sequencer.js';

// HERALD_TEST_STORE_ONLY=1 (CI's PostgreSQL pass): only the files that test what the PostgreSQL
// server does beyond the embedded store; the rest ran on the PGlite pass (see .ci/test-files.ts).
const storeOnly = process.env['HERALD_TEST_STORE_ONLY'] === '1';
const files = classifyTestFiles();
const included = (list: string[]) => (storeOnly ? list.filter((f) => files.postgresPass.includes(f)) : list);

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/setup.ts'],
    // A hang costs seconds. Files that start other processes (Herald, PostgreSQL, InspIRCd,
    // Chromium) get PROCESS_TIMEOUT_MS instead (test/support/setup.ts); a test or hook that
    // legitimately needs longer says so itself.
    testTimeout: 30_000,
    // A hook starting a test Herald (migrating a fresh store) was seen near 30 s on a loaded machine.
    hookTimeout: 60_000,
    // Three on this 2-core machine: the longest files start first (the sequencer below) and they
    // are the chaos and crash files, which mostly wait on leases and process starts (the CPUs were
    // about half idle for the first five minutes of a pass with two workers); a third worker fills that.
    maxWorkers: 3,
    // The workers' V8 flags (test/support/node-flags.ts: embedded PGlite's WebAssembly stays on the baseline compiler).
    execArgv: [...TEST_NODE_FLAGS],
    // A spy a test made is undone after it, so no file sees another's (the shared workers below).
    restoreMocks: true,
    unstubEnvs: true,
    // The longest files first, by a measured pass's times (test/support/sequencer.ts).
    sequence: { sequencer: LongestFirstSequencer },
    // A line per finished file with the count and the time so far (test/support/progress-reporter.ts).
    reporters: ['default', './test/support/progress-reporter.ts'],
    projects: [
      // Files that start other processes (Herald, PostgreSQL, InspIRCd, Chromium, a CLI): each in a
      // worker of its own, so what a killed child or a crash test leaves cannot reach another file.
      { extends: true, test: { name: 'processes', include: included(files.spawning) } },
      // Every other file runs in the same worker as the files before it (isolate: false): the
      // libraries are imported once per worker, not once per file. Measured on these 144 files:
      // 361 CPU-s shared against 648 CPU-s a worker each. A file must close what it opens (a
      // Herald, a client, a timer): what it leaves running can fail a later file in its worker.
      { extends: true, test: { name: 'in-process', include: included(files.inProcess), isolate: false } },
    ],
  },
});
