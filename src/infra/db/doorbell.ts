/**
 * Calls `run` once for a burst of calls to the answer: at most once per `ms` milliseconds, after
 * the burst's first call (`ms` 0: on the next turn of the event loop, after the caller answered).
 */
export function coalesced(run: () => void, ms: number): () => void {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    const fire = (): void => {
      pending = false;
      run();
    };
    if (ms <= 0) setImmediate(fire);
    else setTimeout(fire, ms).unref();
  };
}

/**
 * Tells dispatchers that work became due: the ones in this process at once, the others through a
 * NOTIFY sent after the commit that made the work due, coalesced to at most one per `coalesceMs`
 * (a burst of accepts costs one NOTIFY, and NOTIFY no longer serializes the accepts' commits).
 * A lost NOTIFY (the store briefly down) only delays work until the dispatchers' next poll.
 */
export class Doorbell {
  private readonly local = new Set<() => void>();
  // After the caller has answered: on PGlite a dispatcher's claim runs on this thread, and would
  // otherwise hold the 202 back by its few milliseconds. A burst of rings wakes them once.
  private readonly wakeLocal = coalesced(() => {
    for (const wake of this.local) wake();
  }, 0);
  private readonly notifyOthers: () => void;

  constructor(notify: () => Promise<void>, coalesceMs = 5) {
    this.notifyOthers = coalesced(() => void notify().catch(() => undefined), coalesceMs);
  }

  /** Call `wake` on every ring (a dispatcher of this process); returns the unsubscribe. */
  onRing(wake: () => void): () => void {
    this.local.add(wake);
    return () => this.local.delete(wake);
  }

  /** Work became due (call after its commit). */
  ring(): void {
    this.wakeLocal();
    this.notifyOthers();
  }
}
