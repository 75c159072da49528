/**
 * Rewrites .ci/expected-times.json, the seconds per test file the runner orders files by (the
 * longest first: test/support/sequencer.ts), from the file times one pass wrote
 * (.ci/file-times.ts; `.ci/run` writes them for both passes). A file the pass did not run keeps its
 * old entry; an entry whose file is gone is dropped; a new file missing from both gets UNKNOWN_S
 * until a pass measures it.
 *
 * Usage: HERALD_FILE_TIMES=/tmp/times.json npx vitest run --reporter=default --reporter=./.ci/file-times.ts
 *        npx tsx .ci/expected-times.ts /tmp/times.json
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PassTimes } from './file-times.js';
import { classifyTestFiles } from './test-files.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const UNKNOWN_S = 30;

const input = process.argv[2];
if (input === undefined) {
  process.stderr.write('usage: npx tsx .ci/expected-times.ts <times.json written by .ci/file-times.ts>\n');
  process.exit(2);
}
const pass = JSON.parse(readFileSync(input, 'utf8')) as PassTimes;
const target = path.join(ROOT, '.ci/expected-times.json');
const old = JSON.parse(readFileSync(target, 'utf8')) as Record<string, number>;
const measured = new Map(pass.files.map((f) => [f.file, Math.round(f.ms / 1000)]));
const { storeDependent, storeIndependent } = classifyTestFiles(ROOT);
const rows = [...storeDependent, ...storeIndependent].map((file) => [file, measured.get(file) ?? old[file] ?? UNKNOWN_S] as const);
rows.sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
writeFileSync(target, `${JSON.stringify(Object.fromEntries(rows), null, 1)}\n`);
process.stdout.write(`${target}: ${rows.length} files, ${measured.size} measured by this pass\n`);
