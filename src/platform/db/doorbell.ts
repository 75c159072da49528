/**
 * Tells dispatchers that work became due: the ones in this process at once, the others through a
 * NOTIFY sent after the commit that made the work due, coalesced to at most one per `coalesceMs`
 * (a burst of accepts costs one NOTIFY, and NOTIFY no longer serializes the accepts' commits).
 * A lost NOTIFY (the store briefly down) only delays work until the dispatchers' next poll.
 */
export class Doorbell {
  private readonly local = new Set<() => void>();
  private pending = false;
  private waking = false;

  constructor(
    private readonly notify: () => Promise<void>,
    private readonly coalesceMs = 5,
  ) {}

  /** Call `wake` on every ring (a dispatcher of this process); returns the unsubscribe. */
  onRing(wake: () => void): () => void {
    this.local.add(wake);
    return () => this.local.delete(wake);
  }

  /** Work became due (call after its commit). */
  ring(): void {
    // After the caller has answered: on PGlite a dispatcher's claim runs on this thread, and would
    // otherwise hold the 202 back by its few milliseconds. A burst of rings wakes them once.
    if (!this.waking) {
      this.waking = true;
      setImmediate(() => {
        this.waking = false;
        for (const wake of this.local) wake();
      });
    }
    if (this.pending) return;
    this.pending = true;
    setTimeout(() => {
      this.pending = false;
      this.notify().catch(() => undefined);
    }, this.coalesceMs).unref();
  }
}
