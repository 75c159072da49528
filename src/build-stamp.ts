/**
 * What dist/ was built from: a hash of every file the build reads (src/, migrations/, generated/),
 * written to dist/source-stamp by `npm run build`. The tests start Herald from dist/ only when the
 * stamp matches the checkout (test/support/process.ts), so a rebuilt-but-identical file (CI's
 * `npm run generate` rewrites generated/ byte for byte) keeps dist/ usable, and any real change
 * sends them back to the sources.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The folders the build compiles or bundles, relative to the checkout. */
const SOURCES = ['src', 'migrations', 'generated'];
const STAMP = 'dist/source-stamp';

function filesUnder(root: string, dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? filesUnder(root, path.join(dir, e.name)) : [path.join(dir, e.name)]))
    .sort();
}

/** The hash of every source file's path and bytes, in a fixed order. */
export function sourceStamp(root: string): string {
  const hash = createHash('sha256');
  for (const file of SOURCES.flatMap((dir) => filesUnder(root, dir))) {
    hash.update(`${file.split(path.sep).join('/')}\0`);
    hash.update(readFileSync(path.join(root, file)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

/** True when dist/ holds a build of exactly the sources in `root` now. */
export function distMatchesSources(root: string): boolean {
  try {
    return readFileSync(path.join(root, STAMP), 'utf8').trim() === sourceStamp(root);
  } catch {
    return false;
  }
}

// `node dist/src/build-stamp.js`: the last step of `npm run build`.
if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  writeFileSync(path.join(root, STAMP), `${sourceStamp(root)}\n`);
}
