import { sql, type Kysely } from 'kysely';

/** Spaces requests to a rate: `acquire` resolves when this request may start. */
export interface Pacer {
  acquire(signal?: AbortSignal): Promise<void>;
}

export interface PaceOptions {
  /** Requests per second to space to. */
  perSecond: number;
  /** What the platform allows in any one-second window; above `perSecond`. */
  windowLimit: number;
}

/**
 * The pacer for a store's processes: shared through the database on PostgreSQL (any number of
 * processes), in memory on PGlite (which only one process can open).
 */
export function pacerFor(store: { kind: 'postgres' | 'pglite'; db: Kysely<unknown> }, key: string, options: PaceOptions): Pacer {
  return store.kind === 'postgres' ? new SharedPacer(store.db, key, options) : new LocalPacer(options);
}

/** Taking another start time after one was missed: at most this many times, then go anyway. */
const MAX_RETAKES = 5;

/**
 * How late a request may start after its start time. Start times are `interval` apart; a request
 * started up to `tolerance` late shares a one-second window with at most (1000 + tolerance) /
 * interval others, so the tolerance is what keeps that at or below the window's limit. A request
 * later than that (a busy event loop, a slow answer from the database) takes a new start time
 * instead of bunching up with the punctual ones.
 */
function toleranceMs(options: PaceOptions): number {
  const interval = 1000 / options.perSecond;
  return Math.max(0, (options.windowLimit - 1) * interval - 1000);
}

/** The same spacing within one process. */
export class LocalPacer implements Pacer {
  private next = 0;
  private readonly intervalMs: number;
  private readonly toleranceMs: number;

  constructor(options: PaceOptions) {
    this.intervalMs = 1000 / options.perSecond;
    this.toleranceMs = toleranceMs(options);
  }

  async acquire(signal?: AbortSignal): Promise<void> {
    for (let take = 0; ; take++) {
      const now = performance.now();
      const slot = Math.max(this.next, now);
      this.next = slot + this.intervalMs;
      await pause(slot - now, signal);
      if (performance.now() - slot <= this.toleranceMs || take >= MAX_RETAKES) return;
    }
  }
}

/**
 * A request rate shared by every process through the database: each request takes the next free
 * start time, `1/perSecond` after the previous one (GCRA, one row per budget), and waits for it.
 * Requests are spread evenly, so no one-second window sees more than the limit, however many
 * processes send and whichever of them die (a dead process holds nothing: its taken start times
 * simply pass). The database's clock decides, so the processes' clocks may disagree.
 *
 * If the database cannot be asked, the request goes ahead unpaced (the platform client's own
 * per-process limit still holds) rather than waiting on the store.
 */
export class SharedPacer implements Pacer {
  private readonly intervalSeconds: number;
  private readonly toleranceMs: number;
  /** Requests that went ahead unpaced because the store did not answer. */
  unpaced = 0;

  constructor(
    private readonly db: Kysely<unknown>,
    private readonly key: string,
    options: PaceOptions,
  ) {
    this.intervalSeconds = 1 / options.perSecond;
    this.toleranceMs = toleranceMs(options);
  }

  /** Wait for this request's turn (resolves at once when the budget is idle). */
  async acquire(signal?: AbortSignal): Promise<void> {
    for (let take = 0; ; take++) {
      // The start time is at least this far after the moment the statement was sent.
      const asked = performance.now();
      let waitMs: number;
      try {
        const { rows } = await sql<{ wait_ms: number | string }>`
          insert into rate_budgets as b (key, next_at) values (${this.key}, clock_timestamp() + make_interval(secs => ${this.intervalSeconds}))
          on conflict (key) do update set next_at = greatest(b.next_at, clock_timestamp()) + make_interval(secs => ${this.intervalSeconds})
          returning extract(epoch from (b.next_at - clock_timestamp())) * 1000 - ${this.intervalSeconds * 1000} as wait_ms`.execute(this.db);
        waitMs = Math.max(0, Number(rows[0]?.wait_ms ?? 0));
      } catch {
        this.unpaced += 1;
        return;
      }
      await pause(waitMs, signal);
      if (performance.now() - (asked + waitMs) <= this.toleranceMs || take >= MAX_RETAKES) return;
    }
  }
}

/** Wait `ms`, or reject with the signal's reason as soon as it aborts. */
export function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted === true) return Promise.reject(signal.reason ?? new Error('aborted'));
  if (ms <= 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason ?? new Error('aborted'));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
