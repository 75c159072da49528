/**
 * Rewrites .ci/expected-times.json, the seconds per test file the runner orders files by (the
 * longest first: test/support/sequencer.ts), from the file times one or more passes wrote
 * (.ci/file-times.ts; `.ci/run` writes them for both passes). Given both passes, a file gets the
 * longer of its two times: a PostgreSQL-only file skips in a second on the PGlite pass and takes a
 * minute on the PostgreSQL pass, and ordered by the second it started last there and ended the pass
 * alone. A file no pass ran keeps its old entry; an entry whose file is gone is dropped; a new file
 * missing from all gets UNKNOWN_S until a pass measures it.
 *
 * Usage: HERALD_FILE_TIMES=/tmp/times.json npx vitest run --reporter=default --reporter=./.ci/file-times.ts
 *        npx tsx .ci/expected-times.ts /tmp/pglite-times.json [/tmp/postgres-times.json]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PassTimes } from './file-times.js';
import { classifyTestFiles } from './test-files.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const UNKNOWN_S = 30;

const inputs = process.argv.slice(2);
if (inputs.length === 0) {
  process.stderr.write('usage: npx tsx .ci/expected-times.ts <times.json written by .ci/file-times.ts> [another pass\'s times.json]\n');
  process.exit(2);
}
const target = path.join(ROOT, '.ci/expected-times.json');
const old = JSON.parse(readFileSync(target, 'utf8')) as Record<string, number>;
const measured = new Map<string, number>();
for (const input of inputs) {
  const pass = JSON.parse(readFileSync(input, 'utf8')) as PassTimes;
  for (const f of pass.files) measured.set(f.file, Math.max(measured.get(f.file) ?? 0, Math.round(f.ms / 1000)));
}
const { storeDependent, storeIndependent } = classifyTestFiles(ROOT);
const rows = [...storeDependent, ...storeIndependent].map((file) => [file, measured.get(file) ?? old[file] ?? UNKNOWN_S] as const);
rows.sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
writeFileSync(target, `${JSON.stringify(Object.fromEntries(rows), null, 1)}\n`);
process.stdout.write(`${target}: ${rows.length} files, ${measured.size} measured by ${inputs.length === 1 ? 'this pass' : 'these passes'}\n`);
