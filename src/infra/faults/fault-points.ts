/**
 * Fault points: named places where the chaos campaign (`npm run chaos`) may stall a process, as a
 * long garbage-collection pause, a stalled VM or `SIGSTOP` would, at the moment that matters most
 * (just before a request leaves, between a platform's answer and its commit). Off unless
 * HERALD_FAULT_POINTS is set, which only the campaign does; never set it in a deployment.
 *
 * HERALD_FAULT_POINTS=name=probability,… (e.g. `before-send=0.05,after-answer=0.05`; `once` for a
 * probability stops at the first pass only): at each pass through a listed point the process
 * stops itself (`SIGSTOP`) with that probability; the
 * campaign sees it stopped and continues it (`SIGCONT`) after the pause it chose. What the
 * process does next is what a stalled process does: it carries on as if no time had passed,
 * unless it checks, which is what its fences are for (src/infra/faults/fence.ts).
 */

/** The places a process may be stalled at. */
export const FAULT_POINTS = ['before-send', 'after-answer', 'before-commit'] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

/** A point's probability, or `once`: the first pass stops, no other. */
let parsed: Map<string, number | 'once'> | undefined;

function points(): Map<string, number | 'once'> {
  if (parsed !== undefined) return parsed;
  const raw = process.env['HERALD_FAULT_POINTS'] ?? '';
  const map = new Map<string, number | 'once'>();
  for (const part of raw.split(',')) {
    const [name = '', p = ''] = part.split('=').map((x) => x.trim());
    if (!(FAULT_POINTS as readonly string[]).includes(name)) continue;
    if (p === 'once') map.set(name, 'once');
    else if (Number.isFinite(Number(p)) && p !== '') map.set(name, Math.min(1, Math.max(0, Number(p))));
  }
  parsed = map;
  return map;
}

/**
 * The points HERALD_FAULT_POINTS arms in this process (`name=probability`, `name=once`), none:
 * empty. Start-up logs them as a warning: a process that may stop itself must say so.
 */
export function armedFaultPoints(): string[] {
  return [...points()].map(([name, p]) => `${name}=${p}`);
}

/** Pass a fault point: with its probability (HERALD_FAULT_POINTS), the process stops here until continued. */
export function faultPoint(name: FaultPoint): void {
  const map = points();
  const p = map.get(name);
  if (p === undefined) return;
  if (p === 'once') map.delete(name);
  else if (p <= 0 || Math.random() >= p) return;
  process.kill(process.pid, 'SIGSTOP');
}

/** For tests: read HERALD_FAULT_POINTS again. */
export function resetFaultPoints(): void {
  parsed = undefined;
}
