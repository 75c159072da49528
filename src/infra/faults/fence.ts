import { AsyncLocalStorage } from 'node:async_hooks';
import { faultPoint } from './fault-points.js';

/**
 * Fences: what a process checks before a request leaves and before it writes an outcome, so a
 * process that stalled past its lease (a long pause, a stalled VM, `SIGSTOP`) and then carries on
 * changes nothing another process has taken over meanwhile.
 *
 * A timer cannot do it: a process continued after a stall runs the I/O it had pending before the
 * timers that expired meanwhile, so an abort timer set for the lease's end fires only after the
 * request it was meant to stop has left. A fence is read synchronously on the monotonic clock
 * (performance.now(), which a change of the wall clock does not move) at the last moment before the
 * request leaves: the platform clients call `beforeLeaving()` there (their request hooks, after
 * their own queues and rate budgets, retries included).
 *
 * The fence in force is the job's, carried with the work it starts (AsyncLocalStorage): a job's
 * lease, and while an edit is applied the edit's own lease on the message as well. Work outside any
 * job (a command's answer, a history read for a page) has none and is never stopped.
 */
export interface Fence {
  /** True while the lease it stands for is held, with its margin. */
  holds(): boolean;
  /** What it guards, for the log: "the job's lease", "the edit lease". */
  readonly what: string;
}

/** Thrown instead of sending or writing once the fence in force no longer holds: nothing left, nothing written. */
export class LeaseLostError extends Error {
  constructor(readonly what: string) {
    super(`${what} ended before the request left; nothing was sent`);
    this.name = 'LeaseLostError';
  }
}

/** A fence that holds until `deadline` on the monotonic clock (performance.now()). */
export function fenceUntil(deadline: number, what: string): Fence {
  return { what, holds: () => performance.now() < deadline };
}

/** A fence that holds while `holds` says so. */
export function fenceWhile(holds: () => boolean, what: string): Fence {
  return { what, holds };
}

const current = new AsyncLocalStorage<readonly Fence[]>();

/** Run `fn` (and all it starts) under `fence`, on top of the fences already in force. */
export function withFence<T>(fence: Fence, fn: () => T): T {
  return current.run([...(current.getStore() ?? []), fence], fn);
}

/**
 * Run `fn` (and all it starts) under no fence: for a read that every caller shares (asked once and
 * kept, e.g. who the bot is), which must not carry the fence of whichever job happened to start it
 * to the others waiting on it, nor to a caller outside any job.
 */
export function outsideFences<T>(fn: () => T): T {
  return current.run([], fn);
}

/** The first fence in force that no longer holds (none: undefined). */
export function brokenFence(): Fence | undefined {
  return current.getStore()?.find((f) => !f.holds());
}

/**
 * The last moment before a request leaves: a fault point for a job's request (the chaos campaign
 * may stall the process here), then every fence in force is checked. Throws LeaseLostError when one no longer holds.
 */
export function beforeLeaving(): void {
  // Only a job's requests (those under a fence) are where the campaign stalls a process.
  if ((current.getStore()?.length ?? 0) > 0) faultPoint('before-send');
  const broken = brokenFence();
  if (broken !== undefined) throw new LeaseLostError(broken.what);
}
