import { parseArgs } from 'node:util';
import { CATEGORY_GROUPS, type CategoryGroup } from './arbitraries.js';
import { formatReport, runFuzz } from './campaign.js';

/**
 * `npm run fuzz [-- --seed N --runs N --only herald|control|sandbox|gateway --database-url postgres://…]`:
 * seeded property-based fuzzing of a real `herald serve` (sandbox mode) with requests generated
 * from the contract (test/fuzz/arbitraries.ts), checked by test/fuzz/campaign.ts. Exit 0: no
 * violation; 1: violations; 2: the campaign itself failed.
 */

const USAGE = `usage: npm run fuzz -- [--seed N] [--runs N] [--only GROUP]... [--database-url URL]
  --seed N            replay a run (default: random, printed first)
  --runs N            requests to send (default 2000)
  --only GROUP        herald, control, sandbox or gateway (repeatable; default all)
  --database-url URL  a PostgreSQL server to create a fresh database on (default: TEST_DATABASE_URL,
                      else embedded PGlite); rows are then counted around every refused request`;

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        seed: { type: 'string' },
        runs: { type: 'string' },
        only: { type: 'string', multiple: true },
        'database-url': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const int = (raw: string | undefined, fallback: number, name: string): number => {
    if (raw === undefined) return fallback;
    if (!/^[0-9]{1,10}$/.test(raw)) throw new Error(`--${name} must be a non-negative integer`);
    return Number(raw);
  };
  let seed: number, runs: number;
  try {
    seed = int(values.seed, Math.floor(Math.random() * 2 ** 31), 'seed');
    runs = int(values.runs, 2000, 'runs');
  } catch (err) {
    console.error(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const groups = values.only ?? [...CATEGORY_GROUPS];
  const unknown = groups.filter((g) => !(CATEGORY_GROUPS as readonly string[]).includes(g));
  if (unknown.length > 0) {
    console.error(`unknown group ${unknown.join(', ')}\n${USAGE}`);
    return 2;
  }
  const databaseUrl = values['database-url'] ?? (process.env['TEST_DATABASE_URL'] || undefined);
  console.log(`fuzz: seed ${seed}, ${runs} requests, groups ${groups.join(', ')} (replay: npm run fuzz -- --seed ${seed} --runs ${runs})`);
  const report = await runFuzz({ seed, runs, groups: groups as CategoryGroup[], databaseUrl, log: (line) => console.log(line) });
  console.log(`\n${formatReport(report)}`);
  return report.violations.length > 0 ? 1 : 0;
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
