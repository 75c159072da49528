import { sql, type Kysely } from 'kysely';

/** Spaces requests to a rate: `acquire` resolves when this request may start. */
export interface Pacer {
  acquire(signal?: AbortSignal): Promise<void>;
}

/**
 * The pacer for a store's processes: shared through the database on PostgreSQL (any number of
 * processes), in memory on PGlite (which only one process can open).
 */
export function pacerFor(store: { kind: 'postgres' | 'pglite'; db: Kysely<unknown> }, key: string, perSecond: number): Pacer {
  return store.kind === 'postgres' ? new SharedPacer(store.db, key, perSecond) : new LocalPacer(perSecond);
}

/** The same spacing within one process. */
export class LocalPacer implements Pacer {
  private next = 0;
  private readonly intervalMs: number;

  constructor(perSecond: number) {
    this.intervalMs = 1000 / perSecond;
  }

  acquire(signal?: AbortSignal): Promise<void> {
    const now = performance.now();
    const slot = Math.max(this.next, now);
    this.next = slot + this.intervalMs;
    return pause(slot - now, signal);
  }
}

/**
 * A request rate shared by every process through the database: each request takes the next free
 * start time, `1/perSecond` after the previous one (GCRA, one row per budget), and waits for it.
 * Requests are spread evenly, so no one-second window sees more than `perSecond` of them, however
 * many processes send and whichever of them die (a dead process holds nothing: its taken start
 * times simply pass). The database's clock decides, so the processes' clocks may disagree.
 *
 * If the database cannot be asked, the request goes ahead unpaced (the platform client's own
 * per-process limit still holds) rather than waiting on the store.
 */
export class SharedPacer implements Pacer {
  private readonly intervalSeconds: number;
  /** Requests that went ahead unpaced because the store did not answer. */
  unpaced = 0;

  constructor(
    private readonly db: Kysely<unknown>,
    private readonly key: string,
    perSecond: number,
  ) {
    this.intervalSeconds = 1 / perSecond;
  }

  /** Wait for this request's turn (resolves at once when the budget is idle). */
  async acquire(signal?: AbortSignal): Promise<void> {
    let waitMs: number;
    try {
      const { rows } = await sql<{ wait_ms: number | string }>`
        insert into rate_budgets as b (key, next_at) values (${this.key}, clock_timestamp() + make_interval(secs => ${this.intervalSeconds}))
        on conflict (key) do update set next_at = greatest(b.next_at, clock_timestamp()) + make_interval(secs => ${this.intervalSeconds})
        returning extract(epoch from (b.next_at - clock_timestamp())) * 1000 - ${this.intervalSeconds * 1000} as wait_ms`.execute(this.db);
      waitMs = Number(rows[0]?.wait_ms ?? 0);
    } catch {
      this.unpaced += 1;
      return;
    }
    await pause(waitMs, signal);
  }
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
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
    if (signal?.aborted === true) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
  });
}
