/**
 * V8 flags for the Node processes the tests run: the test runner's workers (vitest.config.ts) and
 * every Herald a test starts (process.ts runHerald). They keep embedded PGlite's WebAssembly on
 * V8's baseline compiler (Liftoff) instead of recompiling its hot functions with the optimizing
 * one in background threads. A Herald on PGlite spent about 1.2 s of CPU in those threads in its
 * first two seconds (2.7 s of CPU to start, 1.5 s with these flags; 1.4 s on PostgreSQL), and a
 * test process is short-lived: it stops before the faster code pays that back. Measured with
 * per-file CPU (utime + stime + reaped children's, from /proc/self/stat): four crash files took
 * 111 CPU-s without them, 82 with; twelve in-process files 119, 96. What runs is the same either
 * way; only how V8 compiles it differs. A deployed Herald keeps V8's defaults, and so do the
 * Heralds `npm run bench` and `npm run chaos` start (runHerald gives these flags under vitest only):
 * a benchmark measures Herald as it is run.
 */
export const TEST_NODE_FLAGS: readonly string[] = ['--no-wasm-tier-up', '--no-wasm-dynamic-tiering'];
