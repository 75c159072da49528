import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The order test files start in: the longest first, by the wall times a measured pass recorded
 * (.ci/expected-times.json: seconds per file, from the file times .ci/run writes), so the short
 * files fill in at the end and no worker idles while another runs a long file alone. Without it,
 * a clean checkout (no durations in vitest's cache) starts the largest files first, and the chaos
 * smoke files, small files of two minutes each, ran last. A file the record does not know yet
 * counts as UNKNOWN_S. Files of equal time keep vitest's own order (the sort is stable).
 * `npx tsx .ci/expected-times.ts <pglite-times.json> [<postgres-times.json>]` rewrites the record from the passes' times.
 */
const UNKNOWN_S = 30;

export function expectedTimes(root: string): Record<string, number> {
  return JSON.parse(readFileSync(path.join(root, '.ci/expected-times.json'), 'utf8')) as Record<string, number>;
}

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = await super.sort(files);
    const root = this.ctx.config.root;
    const times = expectedTimes(root);
    const expected = (spec: TestSpecification) => times[path.relative(root, spec.moduleId).split(path.sep).join('/')] ?? UNKNOWN_S;
    return ordered.sort((a, b) => expected(b) - expected(a));
  }
}
