import { afterAll, expect, vi } from 'vitest';
import { startsProcesses } from '../../.ci/test-files.js';
import { killRunningProcesses } from './process.js';

/**
 * The default test and hook timeout of a file that starts other processes (a Herald, PostgreSQL,
 * InspIRCd, Chromium): they start slowly on a loaded 2-core machine. Other files keep the shorter
 * defaults of vitest.config.ts.
 */
const PROCESS_TIMEOUT_MS = 60_000;

const file = expect.getState().testPath;
if (file !== undefined && startsProcesses(file)) vi.setConfig({ testTimeout: PROCESS_TIMEOUT_MS, hookTimeout: PROCESS_TIMEOUT_MS });

// After each test file: no Herald it started outlives it, even when a test timed out before its
// own cleanup ran (the run's teardown catches what a crashed worker left, see run-dir.ts).
afterAll(async () => {
  await killRunningProcesses();
});
