/**
 * Which test files depend on the store, so CI's PostgreSQL pass runs only those (the PGlite pass
 * runs every file). A file depends on the store when it opens one through test/support/db.ts:
 * it calls `testDatabase`, reads `onPostgres` or TEST_DATABASE_URL, or calls a helper (in any
 * non-test module under test/, e.g. `startTestHerald`, `archiveHarness`) whose exported function
 * does so, found to a fixed point. Importing a constant from such a helper module (say
 * `newRequestId` from test/support/herald.ts) does not count: that file runs the same on both.
 *
 * A few files start a whole test Herald (so a store) only to have something to look at, and test
 * nothing the store does: they are listed in STORE_INCIDENTAL and run once.
 *
 * `npx tsx .ci/test-files.ts` prints both lists.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Files that open a store only to have a Herald to look at; what they check is not the store's. */
const STORE_INCIDENTAL: Record<string, string> = {
  'test/alert-rules.test.ts': 'the alert rules, the dashboard and the metric names a running Herald exports',
  'test/archive-ui.test.ts': 'the archive web UI in a browser',
  'test/docs-ui.test.ts': 'the /docs page in a browser',
};

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
  return [...openers].some((name) => new RegExp(`\\b${name}\\(`).test(text));
}

/** Helpers and calls that start another process: a Herald, PostgreSQL, InspIRCd, Chromium, a CLI (crashRig: test/support/rigs.ts). */
const SPAWNS = /\b(?:startHeraldProcess|processHarness|crashRig|crashRigOn|runHerald|mcpOverStdio|runCommand|startPgCluster|startIrcd|runCampaign|runFuzz|spawn|spawnSync|execSync|execFile|execFileSync)\(|chromium\.launch/;

/** True when the test file at `file` (absolute) starts another process. */
export function startsProcesses(file: string): boolean {
  return SPAWNS.test(readFileSync(file, 'utf8'));
}

export interface TestFiles {
  storeDependent: string[];
  storeIndependent: string[];
  /** Files that start other processes: they keep the longer timeouts (vitest.config.ts). */
  spawning: string[];
}

/** Every test file under test/, relative to the repository, split by whether it opens a store. */
export function classifyTestFiles(root = ROOT): TestFiles {
  const all = walk(path.join(root, 'test')).map((f) => path.relative(root, f).split(path.sep).join('/'));
  const tests = all.filter((f) => f.endsWith('.test.ts')).sort();
  const helpers = all.filter((f) => !f.endsWith('.test.ts') && !f.startsWith('test/bench/'));
  const functions = helpers.flatMap((f) => exportedFunctions(readFileSync(path.join(root, f), 'utf8')));
  const openers = new Set(['testDatabase']);
  for (let grew = true; grew; ) {
    grew = false;
    for (const fn of functions) {
      if (!openers.has(fn.name) && opensStore(fn.body, openers)) {
        openers.add(fn.name);
        grew = true;
      }
    }
  }
  const storeDependent = tests.filter((f) => !(f in STORE_INCIDENTAL) && opensStore(readFileSync(path.join(root, f), 'utf8'), openers));
  const spawning = tests.filter((f) => startsProcesses(path.join(root, f)));
  return { storeDependent, storeIndependent: tests.filter((f) => !storeDependent.includes(f)), spawning };
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { storeDependent, storeIndependent, spawning } = classifyTestFiles();
  process.stdout.write(`store-dependent (both passes, ${storeDependent.length}):\n  ${storeDependent.join('\n  ')}\n`);
  process.stdout.write(`store-independent (PGlite pass only, ${storeIndependent.length}):\n  ${storeIndependent.join('\n  ')}\n`);
  process.stdout.write(`starting other processes (longer timeouts, ${spawning.length}):\n  ${spawning.join('\n  ')}\n`);
}
