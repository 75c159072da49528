import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Crash tests spawn Herald processes; keep the 2-core machine from thrashing.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
