import { afterAll } from 'vitest';
import { killRunningProcesses } from './process.js';

// After each test file: no Herald it started outlives it, even when a test timed out before its
// own cleanup ran (the run's teardown catches what a crashed worker left, see run-dir.ts).
afterAll(async () => {
  await killRunningProcesses();
});
