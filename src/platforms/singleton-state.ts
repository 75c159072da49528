import type { Singleton } from '../infra/db/singleton.js';

// Apart from singletons.ts so a platform's index (loaded for --help) imports no database driver.

/** `held`, or `standby (held by <holder>)` (`standby` when nobody was seen holding it). */
export function stateOf(s: Pick<Singleton, 'held' | 'holder'>): string {
  if (s.held()) return 'held';
  const holder = s.holder();
  return holder === undefined ? 'standby' : `standby (held by ${holder})`;
}
