import { announce } from './options.js';

// `npm run bench` (test/bench/bench.ts): the options first, answered at once (--help, --dry-run, a
// refused flag, the estimate), then the benchmark's code.
announce();
await import('./bench.js');
