import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The order test files start in: the longest first, by the wall times a measured pass recorded
 * (.ci/expected-times.json: seconds per file, from the file times .ci/run writes), so the short
 * files fill in at the end and no worker idles while another runs a long file alone. Without it,
 * a clean checkout (no durations in vitest's cache) starts the largest files first, and the chaos
 * smoke files, small files of two minutes each, ran last. A file the record does not know yet
 * counts as UNKNOWN_S. Files of equal time keep vitest's own order (the sort is stable). Shorter
 * files are grouped by project (runOrder).
 * `npx tsx .ci/expected-times.ts <pglite-times.json> [<postgres-times.json>]` rewrites the record from a run's times.
 */
const UNKNOWN_S = 30;

export function expectedTimes(root: string): Record<string, number> {
  return JSON.parse(readFileSync(path.join(root, '.ci/expected-times.json'), 'utf8')) as Record<string, number>;
}

/** Files expected to take at least this long (seconds) start first, longest first, whatever their project. */
const LONG_S = 30;

/**
 * The rest: the files of projects that give each file a worker of its own first (longest first),
 * then each project whose files share workers (vitest.config.ts: isolate: false) as one block.
 * vitest keeps a shared worker for the next file only when the next file in the queue is of the same
 * project: files of two projects taking turns would start a worker, and import every library
 * again, for nearly every file.
 */
export function runOrder(specs: readonly { name: string; project: string; shared: boolean }[], expected: (name: string) => number): number[] {
  const tier = (i: number): number => {
    const s = specs[i] as (typeof specs)[number];
    return expected(s.name) >= LONG_S ? 0 : s.shared ? 2 : 1;
  };
  return specs
    .map((_s, i) => i)
    .sort((a, b) => {
      const sa = specs[a] as (typeof specs)[number];
      const sb = specs[b] as (typeof specs)[number];
      return tier(a) - tier(b) || (tier(a) === 2 ? sa.project.localeCompare(sb.project) : 0) || expected(sb.name) - expected(sa.name);
    });
}

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = await super.sort(files);
    const root = this.ctx.config.root;
    const times = expectedTimes(root);
    const specs = ordered.map((spec) => ({ name: path.relative(root, spec.moduleId).split(path.sep).join('/'), project: spec.project.name, shared: spec.project.config.isolate === false }));
    return runOrder(specs, (name) => times[name] ?? UNKNOWN_S).map((i) => ordered[i] as TestSpecification);
  }
}
