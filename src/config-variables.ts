import type { Env } from './infra/env.js';
import { loadConfig } from './config.js';

// Herald's variables: which ones it reads (found by running loadConfig, not listed twice), and
// which set ones it does not read, most likely typos, for the warning `herald` prints at start-up.

/**
 * Variables Herald reads outside loadConfig: the test harness's run folder (test/support/run-dir.ts),
 * and the chaos campaign's fault points (src/infra/faults/fault-points.ts).
 */
const READ_ELSEWHERE = ['HERALD_TEST_RUN_DIR', 'HERALD_FAULT_POINTS'];

/** Herald's own prefixes: a variable with one of them that Herald does not read is most likely a typo. */
const PREFIXES = ['HERALD_', 'DISCORD_', 'MCP_'];

let known: readonly string[] | undefined;

/**
 * Every variable Herald reads. Not a second list to keep in step: loadConfig itself runs once on
 * an environment that turns every optional part on, and each name it asks for is recorded.
 */
export function knownVariables(): readonly string[] {
  if (known === undefined) {
    const read = new Set<string>(READ_ELSEWHERE);
    // Each platform reads all of its variables, configured or not.
    const probe: Env = {};
    loadConfig(
      new Proxy(probe, {
        get(target, name) {
          if (typeof name === 'string') read.add(name);
          return typeof name === 'string' ? target[name] : undefined;
        },
      }),
    );
    known = Object.freeze([...read].sort());
  }
  return known;
}

export interface UnknownVariable {
  readonly name: string;
  /** The known variable it most likely meant, when one is close enough to say so. */
  readonly suggestion: string | undefined;
}

/** Variables set with Herald's prefixes that Herald does not read (names only: values may be secrets). */
export function unknownVariables(env: Env = process.env): UnknownVariable[] {
  const names = knownVariables();
  return Object.keys(env)
    .filter((name) => PREFIXES.some((p) => name.startsWith(p)) && !names.includes(name))
    .sort()
    .map((name) => ({ name, suggestion: closest(name, names) }));
}

/**
 * The known name nearest to `name` (a prefix added to an unprefixed one counts too: HERALD_PORT →
 * PORT); between equally near ones, the one sharing the longest start (HERALD_MCP_WAIT → _WAIT_MS).
 */
function closest(name: string, names: readonly string[]): string | undefined {
  let best: { name: string; distance: number; shared: number } | undefined;
  for (const candidate of names) {
    const forms = PREFIXES.some((p) => candidate.startsWith(p)) ? [candidate] : [candidate, ...PREFIXES.map((p) => p + candidate)];
    const distance = Math.min(...forms.map((form) => editDistance(name, form)));
    let shared = 0;
    while (shared < name.length && name[shared] === candidate[shared]) shared++;
    if (best === undefined || distance < best.distance || (distance === best.distance && shared > best.shared)) best = { name: candidate, distance, shared };
  }
  return best !== undefined && best.distance <= Math.max(2, Math.floor(name.length / 4)) ? best.name : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  const at = (i: number, j: number): number => d[i]?.[j] ?? Infinity;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, at(i - 2, j - 2) + 1);
      (d[i] as number[])[j] = v;
    }
  }
  return at(a.length, b.length);
}
