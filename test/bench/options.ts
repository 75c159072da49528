import { announceEstimate, formatDuration, intFlag, refuse, scriptArgs } from '../support/script-args.js';

/**
 * `npm run bench`'s options (test/bench/bench.ts measures): parsed, checked and its duration
 * estimated before the benchmark's code is loaded, so `--help`, `--dry-run` and a refused flag
 * answer at once (test/bench/run.ts loads the rest after).
 */

export const argv = process.argv.slice(2);
/** Every phase, in the order a full run measures them; `--only=a,b` runs those. */
export const ALL_PHASES = ['reads', 'ingest', 'latency', 'drain', 'slack', 'idle', 'steady', 'memory', 'archive', 'scrape', 'hear', 'irc', 'vacuum', 'twins', 'identities', 'slack-identities'];
/**
 * Each phase's rough duration in seconds, full and --quick, both stores and their set-up included
 * (a full run of all but twins took 32 minutes on 2 cores; twins drains 100 alerts into one
 * channel at 5 per 5 s on each store, quick or not). Steady's is for its default length.
 */
const PHASE_ESTIMATE_S: Readonly<Record<string, { full: number; quick: number }>> = {
  reads: { full: 270, quick: 200 },
  ingest: { full: 180, quick: 110 },
  latency: { full: 90, quick: 60 },
  drain: { full: 170, quick: 60 },
  slack: { full: 60, quick: 30 },
  idle: { full: 60, quick: 40 },
  steady: { full: 260, quick: 90 },
  memory: { full: 180, quick: 40 },
  archive: { full: 180, quick: 40 },
  scrape: { full: 250, quick: 60 },
  hear: { full: 120, quick: 40 },
  irc: { full: 120, quick: 50 },
  vacuum: { full: 120, quick: 40 },
  twins: { full: 240, quick: 240 },
  identities: { full: 90, quick: 80 },
  'slack-identities': { full: 90, quick: 60 },
};
const USAGE = `usage: npm run bench -- [--quick] [--only=PHASE,…] [--steady=SECONDS] [--out=FILE] [--heap] [--tsx]
  --quick            short phases (fewer rows, shorter rounds)
  --only=PHASE,…     run only these phases (default all): ${ALL_PHASES.join(', ')}
  --steady=SECONDS   the steady phase's length (default 120, 30 with --quick; 600 is the full run)
  --out=FILE         the JSON report (default data/bench/bench-<time>.json)
  --heap             also where idle memory is: RSS by kind of mapping, a summarised heap snapshot
  --tsx              measure memory under tsx instead of the compiled CLI
  --dry-run          print how long the run would take and start nothing
  -h, --help         this help; starts nothing

A full run takes about 38 minutes, --quick about 18; the estimate for the options given (each
phase's) is printed first. Needs PostgreSQL at TEST_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/postgres) besides PGlite.`;
export const args = scriptArgs('npm run bench', USAGE, {
  quick: { type: 'boolean' },
  only: { type: 'string' },
  steady: { type: 'string' },
  out: { type: 'string' },
  heap: { type: 'boolean' },
  tsx: { type: 'boolean' },
});
export const quick = args.quick === true;
export const only = new Set((args.only ?? ALL_PHASES.join(',')).split(','));
const unknownPhases = [...only].filter((p) => !ALL_PHASES.includes(p));
if (unknownPhases.length > 0) refuse('npm run bench', USAGE, `unknown phase ${unknownPhases.join(', ')}`);

export const STEADY_S = (() => {
  try {
    return intFlag(args.steady, quick ? 30 : 120, 'steady', 1);
  } catch (err) {
    return refuse('npm run bench', USAGE, (err as Error).message);
  }
})();

/** A phase's rough duration in seconds with the options given (steady: its length on both stores). */
function estimateS(phase: string): number {
  if (phase === 'steady') return 2 * STEADY_S + 20;
  const e = PHASE_ESTIMATE_S[phase];
  return e === undefined ? 0 : quick ? e.quick : e.full;
}


/** Say how long the chosen phases will take (and stop there on --dry-run). */
export function announce(): void {
  const chosen = ALL_PHASES.filter((p) => only.has(p));
  announceEstimate(`about ${formatDuration(chosen.reduce((sum, p) => sum + estimateS(p), 0))} (${chosen.map((p) => `${p} ~${formatDuration(estimateS(p))}`).join(', ')})`);
}
