import { CATEGORY_GROUPS, type CategoryGroup } from './groups.js';
import { announceEstimate, formatDuration, intFlag, refuse, scriptArgs } from '../support/script-args.js';

/**
 * `npm run fuzz [-- --seed N --runs N --only herald|control|sandbox|gateway --database-url postgres://…]`:
 * seeded property-based fuzzing of a real `herald serve` (sandbox mode) with requests generated
 * from the contract (test/fuzz/arbitraries.ts), checked by test/fuzz/campaign.ts; then the
 * boundary pass (test/fuzz/boundary.ts, boundary-mcp.ts): every operation's and every MCP tool's
 * fields at their contract's boundaries, enumerated. Exit 0: no violation; 1: violations; 2: the
 * campaign itself failed.
 */

const USAGE = `usage: npm run fuzz -- [--seed N] [--runs N] [--only GROUP]... [--database-url URL]
  --seed N            replay a run (default: random, printed first)
  --runs N            requests to send (default 2000)
  --only GROUP        herald, control, sandbox or gateway (repeatable; default all)
  --database-url URL  a PostgreSQL server to create a fresh database on (default: TEST_DATABASE_URL,
                      else embedded PGlite); rows are then counted around every refused request
  --boundary MODE     the boundary pass after the seeded campaign: on (default), off, or only
  --dry-run           print how long the run would take and start nothing
  -h, --help          this help; starts nothing

It takes about 7 minutes at the defaults (2,000 requests about 2 minutes, the boundary pass about
5, each starting its Herald); the estimate for the options given is printed first.`;

/** Rough, from measured runs: starting Herald, a seeded request's round trip with its checks, and the boundary pass (about 1,800 requests and 1,900 tool calls). */
const START_S = 30;
const PER_RUN_S = 0.05;
const BOUNDARY_S = 240;

async function main(): Promise<number> {
  const values = scriptArgs('npm run fuzz', USAGE, {
    seed: { type: 'string' },
    runs: { type: 'string' },
    only: { type: 'string', multiple: true },
    'database-url': { type: 'string' },
    boundary: { type: 'string' },
  });
  let seed: number, runs: number;
  try {
    seed = intFlag(values.seed, Math.floor(Math.random() * 2 ** 31), 'seed');
    runs = intFlag(values.runs, 2000, 'runs');
  } catch (err) {
    return refuse('npm run fuzz', USAGE, (err as Error).message);
  }
  const groups = values.only ?? [...CATEGORY_GROUPS];
  const unknown = groups.filter((g) => !(CATEGORY_GROUPS as readonly string[]).includes(g));
  if (unknown.length > 0) refuse('npm run fuzz', USAGE, `unknown group ${unknown.join(', ')}`);
  const boundary = values.boundary ?? 'on';
  if (!['on', 'off', 'only'].includes(boundary)) refuse('npm run fuzz', USAGE, '--boundary must be on, off or only');
  const campaignS = boundary === 'only' ? 0 : START_S + runs * PER_RUN_S;
  const boundaryS = boundary === 'off' ? 0 : START_S + BOUNDARY_S;
  announceEstimate(`about ${formatDuration(campaignS + boundaryS)} (${[...(campaignS > 0 ? [`${runs} seeded requests ~${formatDuration(campaignS)}`] : []), ...(boundaryS > 0 ? [`boundary pass ~${formatDuration(boundaryS)}`] : [])].join(', ')})`);
  const databaseUrl = values['database-url'] ?? (process.env['TEST_DATABASE_URL'] || undefined);
  let violations = 0;
  // Loaded only now: --help, --dry-run and a refused flag answer without the fuzzer's code.
  const [{ formatReport, runFuzz }, { formatBoundary, runBoundary }] = await Promise.all([import('./campaign.js'), import('./boundary-mcp.js')]);
  if (boundary !== 'only') {
    console.log(`fuzz: seed ${seed}, ${runs} requests, groups ${groups.join(', ')} (replay: npm run fuzz -- --seed ${seed} --runs ${runs})`);
    const report = await runFuzz({ seed, runs, groups: groups as CategoryGroup[], databaseUrl, log: (line) => console.log(line) });
    console.log(`\n${formatReport(report)}`);
    violations += report.violations.length;
  }
  if (boundary !== 'off' && !stopping) {
    console.log('\nfuzz: the boundary pass (every operation and MCP tool, each field at its boundaries)');
    const report = await runBoundary({ databaseUrl, log: (line) => console.log(line) });
    console.log(`\n${formatBoundary(report)}`);
    violations += report.violations.length;
  }
  return violations > 0 ? 1 : 0;
}

let stopping = false;
process.on('SIGINT', () => {
  if (stopping) process.exit(130);
  stopping = true;
  console.error('interrupted: stopping Herald (again to exit at once)');
});

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`fuzz: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(2);
  },
);
