/**
 * Which test files CI's PostgreSQL pass runs (the PGlite pass runs every file). PGlite is the same
 * PostgreSQL, compiled to WebAssembly, so a file that only keeps rows in its store tests nothing
 * more on the server. The PostgreSQL pass runs the files that test what the server does that the
 * embedded store cannot show:
 *
 * - every file with a PostgreSQL-only test or path (`it.skipIf(!onPostgres)`,
 *   `describe.skipIf(!onPostgres)`, `runIf(onPostgres)`, `if (onPostgres)`): several processes or
 *   pools on one database, NOTIFY, the pool itself; found from the source, so such a test can never
 *   be left to skip on both passes;
 * - the files listed in STORE_BEHAVIOUR, each with what it tests of the store itself: claims under
 *   concurrency, lanes, cursors and numbers the driver parses, migrations, locks.
 *
 * A file opens a store when it calls `testDatabase`, reads `onPostgres` or TEST_DATABASE_URL, or
 * calls a helper (in any non-test module under test/, e.g. `startTestHerald`, `archiveHarness`)
 * whose exported function does so, found to a fixed point. STORE_BEHAVIOUR may list only such files
 * (test/ci-budget.test.ts checks it).
 *
 * `npx tsx .ci/test-files.ts` prints the lists.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** In-process files that test the store's own behaviour, run on both passes: the file and why. */
export const STORE_BEHAVIOUR: Record<string, string> = {
  'test/archive-storage.test.ts': 'the storage limit under concurrent download steps (row locks)',
  'test/chat-kind-migration.test.ts': 'a migration over existing rows',
  'test/claim-cursor.test.ts': 'the claim cursor over due rows',
  'test/deliveries.test.ts': 'posts exactly once through the outbox, the engine every platform uses',
  'test/edit-applied-seq.test.ts': "an edit's applied seq written under its claim",
  'test/fence.test.ts': 'lease tokens and fences checked in the store',
  'test/int8-cursors.test.ts': 'numbers at and past int8, as the driver parses them',
  'test/outbox-lanes.test.ts': 'lanes and the claim query',
  'test/outbox-poison-inbox.test.ts': 'a poison row in the inbox does not block the rows behind it',
  'test/outbox-poison.test.ts': 'poison rows in the deliveries table do not block the queue',
  'test/queue-age.test.ts': 'the age of the oldest due job, read from the store',
  'test/replica-held-elsewhere.test.ts': 'a delivery left to the replica holding its connection (leases)',
  'test/scrape-step-token.test.ts': "a scrape step's write under its claim token",
  'test/shared-pacer.test.ts': 'rate budgets shared through the store',
  'test/slack-pacer.test.ts': 'Slack budgets shared by processes through the store',
  'test/twin-lane.test.ts': 'the twin lane in the claim query',
};

/** A PostgreSQL-only test or path in a file's source (test/support/db.ts: onPostgres). */
export const POSTGRES_ONLY = /\.skipIf\(\s*!onPostgres\s*\)|\.runIf\(\s*onPostgres\s*\)|\bif \(\s*!?onPostgres\s*\)/;

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'fixtures' ? [] : walk(p);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** The exported functions of a module's source, each with its text up to the next top-level export. */
function exportedFunctions(source: string): { name: string; body: string }[] {
  const starts = [...source.matchAll(/^export (?:async )?function\*? ?(\w+)/gm)];
  return starts.map((m) => {
    const from = m.index ?? 0;
    const next = source.slice(from + 1).search(/^export /m);
    return { name: m[1] as string, body: next < 0 ? source.slice(from) : source.slice(from, from + 1 + next) };
  });
}

/** True when `text` calls one of `openers` or reads the PostgreSQL switch directly. */
function opensStore(text: string, openers: Set<string>): boolean {
  if (/\bonPostgres\b|process\.env\[['"]TEST_DATABASE_URL['"]\]/.test(text)) return true;
  return callsOneOf(text, openers);
}

function callsOneOf(text: string, names: Set<string>): boolean {
  return [...names].some((name) => new RegExp(`\\b${name}\\(`).test(text));
}

/** The exported functions of the helpers under test/ (not the tests, not the benchmark). */
function helperFunctions(root: string): { name: string; body: string }[] {
  return walk(path.join(root, 'test'))
    .map((f) => path.relative(root, f).split(path.sep).join('/'))
    .filter((f) => !f.endsWith('.test.ts') && !f.startsWith('test/bench/'))
    .flatMap((f) => exportedFunctions(readFileSync(path.join(root, f), 'utf8')));
}

/** `known` grown by every function whose body `matches` (given what is known so far), to a fixed point. */
function closure(functions: { name: string; body: string }[], known: Set<string>, matches: (body: string, known: Set<string>) => boolean): Set<string> {
  for (let grew = true; grew; ) {
    grew = false;
    for (const fn of functions) {
      if (!known.has(fn.name) && matches(fn.body, known)) {
        known.add(fn.name);
        grew = true;
      }
    }
  }
  return known;
}

/** Helpers and calls that start another process: a Herald, PostgreSQL, InspIRCd, Chromium, a CLI (crashRig: test/support/rigs.ts). */
const SPAWNS = /\b(?:startHeraldProcess|chaosSmoke|processHarness|crashRig|crashRigOn|runHerald|mcpOverStdio|runCommand|startPgCluster|startIrcd|runCampaign|runFuzz|runBoundary|spawn|spawnSync|execSync|execFile|execFileSync)\(|chromium\.launch/;

/**
 * The exported functions of the helpers under test/ that start another process: those whose text
 * matches SPAWNS or calls one of them, found to a fixed point (as the store openers are), so a
 * file that starts a process through any helper is known to.
 */
function processStarters(root: string): Set<string> {
  return closure(helperFunctions(root), new Set(), (body, known) => SPAWNS.test(body) || callsOneOf(body, known));
}

let starters: Set<string> | undefined;
/** True when the test file at `file` (absolute) starts another process, itself or through a helper. */
export function startsProcesses(file: string, root = ROOT): boolean {
  const text = readFileSync(file, 'utf8');
  starters ??= processStarters(root);
  return SPAWNS.test(text) || callsOneOf(text, starters);
}

export interface TestFiles {
  /** Files that open a store. */
  storeDependent: string[];
  storeIndependent: string[];
  /** The files CI's PostgreSQL pass runs. */
  postgresPass: string[];
  /** Files that start other processes: they keep the longer timeouts, and a worker each (vitest.config.ts). */
  spawning: string[];
  /** The other files: they share workers (vitest.config.ts). */
  inProcess: string[];
}

/** Every test file under test/, relative to the repository, split by whether it opens a store. */
export function classifyTestFiles(root = ROOT): TestFiles {
  const all = walk(path.join(root, 'test')).map((f) => path.relative(root, f).split(path.sep).join('/'));
  const tests = all.filter((f) => f.endsWith('.test.ts')).sort();
  const openers = closure(helperFunctions(root), new Set(['testDatabase']), opensStore);
  const source = (f: string) => readFileSync(path.join(root, f), 'utf8');
  const storeDependent = tests.filter((f) => opensStore(source(f), openers));
  const postgresPass = storeDependent.filter((f) => f in STORE_BEHAVIOUR || POSTGRES_ONLY.test(source(f)));
  const spawning = tests.filter((f) => startsProcesses(path.join(root, f)));
  return { storeDependent, storeIndependent: tests.filter((f) => !storeDependent.includes(f)), postgresPass, spawning, inProcess: tests.filter((f) => !spawning.includes(f)) };
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { storeDependent, storeIndependent, postgresPass, spawning } = classifyTestFiles();
  process.stdout.write(`on the PostgreSQL pass too (${postgresPass.length}):\n  ${postgresPass.join('\n  ')}\n`);
  const once = [...storeDependent.filter((f) => !postgresPass.includes(f)), ...storeIndependent].sort();
  process.stdout.write(`on the PGlite pass only (${once.length}):\n  ${once.join('\n  ')}\n`);
  process.stdout.write(`starting other processes (longer timeouts, ${spawning.length}):\n  ${spawning.join('\n  ')}\n`);
}
