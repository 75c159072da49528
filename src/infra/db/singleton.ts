import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';

/** What must be held by one process at a time, as this process sees it. */
export interface Singleton {
  readonly name: string;
  /** Whether this process holds it now. */
  held(): boolean;
  /** Who holds it, as last seen (this process's id while it holds it); undefined when nobody was seen holding it. */
  holder(): string | undefined;
  /** Stop renewing (or trying), and give the lease up if held. onLost is not called. */
  close(): Promise<void>;
  /**
   * Give the lease up now, if held, and take no part for `restMs`: onLost first (awaited, at most
   * half the TTL), then the lease is freed so another process takes it at its next try; after
   * `restMs` this process bids again, or sooner when a TTL after the lease was freed nobody has
   * taken it (no other process bids). For a holder that cannot use the connection (see `up`).
   */
  standDown(restMs: number): Promise<void>;
}

export interface SingletonOptions {
  /** This process's id, stored as the holder. */
  holder: string;
  /** How long a lease lasts from its last renewal: another process may take it over after that. */
  ttlMs: number;
  /** How often the holder renews (and a non-holder tries to take it). Default a fifth of ttlMs. */
  renewEveryMs?: number;
  /** Called when this process takes the lease: start using the connection. */
  onAcquired?: () => void;
  /** Called when a renewal fails or is refused, or the holder stands down: stop using the connection at once (a promise: until it is stopped). */
  onLost?: () => void | Promise<void>;
  /**
   * Whether the connection the lease is for is up. With `downMs`: a holder whose connection has
   * not been up for `downMs` (counted from when it took the lease or last saw it up) stands down
   * for `downMs`, so a process that can use the connection takes it over.
   */
  up?: () => boolean;
  /** See `up`. */
  downMs?: number;
  /** Only watch who holds it, never take it (a process that could not use the connection). */
  watch?: boolean;
}

/** A holder id for this process: host, pid and a random part (a restarted process is a new holder). */
export function processHolderId(): string {
  return `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}

/**
 * Hold `name` under a lease in the store. On PGlite, which one process opens, it is held at once
 * and for good. On PostgreSQL one statement takes the lease when it is free, expired, or already
 * ours (then it renews it); the holder renews every `renewEveryMs`, and a holder whose renewals have
 * not succeeded for half the TTL gives up (onLost) before another process can take the lease over
 * (which it can only once the TTL after the last renewal has run out): two never hold it at once.
 * The database's clock decides expiry; the give-up deadline is measured on this process's clock
 * from when the last successful renewal was sent. A holder whose connection stays down (`up`,
 * `downMs`) stands down: it frees the lease and bids again only after `downMs`.
 */
export function holdSingleton(store: { kind: 'postgres' | 'pglite'; db: Kysely<unknown> }, name: string, options: SingletonOptions): Singleton {
  if (store.kind === 'pglite') {
    let open = options.watch !== true;
    queueMicrotask(() => {
      if (open) options.onAcquired?.();
    });
    return {
      name,
      held: () => open,
      holder: () => (open ? options.holder : undefined),
      close: async () => {
        open = false;
      },
      // The one process that opens the store has nobody to hand the connection to.
      standDown: async () => undefined,
    };
  }
  return new LeasedSingleton(store.db, name, options);
}

class LeasedSingleton implements Singleton {
  private isHeld = false;
  private seenHolder: string | undefined;
  /** When (this process's monotonic clock) the last successful take or renewal was sent. */
  private renewedAt = 0;
  private inFlight: Promise<void> | undefined;
  private closed = false;
  /** Until when (monotonic) this process stays out of the bidding after standing down. */
  private restUntil = 0;
  /** When (monotonic) this process last freed the lease by standing down. */
  private freedAt = 0;
  /** When (monotonic) this holder last saw its connection up, or took the lease. */
  private upAt = 0;
  private standingDown: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;
  private readonly renewEveryMs: number;

  constructor(
    private readonly db: Kysely<unknown>,
    readonly name: string,
    private readonly options: SingletonOptions,
  ) {
    this.renewEveryMs = options.renewEveryMs ?? Math.max(50, Math.floor(options.ttlMs / 5));
    this.timer = setInterval(() => this.tick(), this.renewEveryMs);
    this.timer.unref();
    this.tick();
  }

  held(): boolean {
    return this.isHeld;
  }

  holder(): string | undefined {
    return this.seenHolder;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await this.inFlight?.catch(() => undefined);
    if (!this.isHeld) return;
    this.isHeld = false;
    // Give it up so another process need not wait for it to expire.
    await sql`delete from singleton_leases where name = ${this.name} and holder = ${this.options.holder}`.execute(this.db).catch(() => undefined);
  }

  standDown(restMs: number): Promise<void> {
    this.standingDown ??= this.leave(restMs).finally(() => (this.standingDown = undefined));
    return this.standingDown;
  }

  private async leave(restMs: number): Promise<void> {
    this.restUntil = performance.now() + restMs;
    this.freedAt = performance.now();
    if (this.closed || !this.isHeld) return;
    this.isHeld = false;
    const stopped = Promise.resolve(this.options.onLost?.()).catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([stopped, new Promise((r) => (timer = setTimeout(r, this.options.ttlMs / 2)))]);
    clearTimeout(timer);
    // A renewal still on its way must not take the lease back after it is freed.
    await this.inFlight?.catch(() => undefined);
    await sql`delete from singleton_leases where name = ${this.name} and holder = ${this.options.holder}`.execute(this.db).catch(() => undefined);
    this.seenHolder = undefined;
    this.freedAt = performance.now();
  }

  private tick(): void {
    if (this.closed) return;
    const now = performance.now();
    // A holder that has not renewed for half the TTL stops, whether or not a statement is still waiting.
    if (this.isHeld && now - this.renewedAt > this.options.ttlMs / 2) this.lose();
    // A holder that cannot use the connection lets another process have it.
    const { up, downMs } = this.options;
    if (this.isHeld && up !== undefined && downMs !== undefined) {
      if (up()) this.upAt = now;
      else if (now - this.upAt >= downMs) void this.standDown(downMs);
    }
    if (this.inFlight !== undefined) return;
    this.inFlight = this.attempt().finally(() => {
      this.inFlight = undefined;
    });
  }

  /** Take or renew the lease in one statement; a refusal while held is a loss. */
  private async attempt(): Promise<void> {
    const sent = performance.now();
    const me = this.options.holder;
    let mine: boolean;
    try {
      if (this.options.watch === true || this.standingDown !== undefined || sent < this.restUntil) {
        const current = await sql<{ holder: string }>`select holder from singleton_leases where name = ${this.name} and expires_at >= clock_timestamp()`.execute(this.db);
        this.seenHolder = current.rows[0]?.holder;
        // Resting, and a whole TTL after the lease was freed nobody has taken it (no other process
        // bids: a single replica, the only dispatcher): resting only leaves the connection unheld, so bid again.
        if (this.options.watch !== true && this.standingDown === undefined && this.seenHolder === undefined && sent - this.freedAt >= this.options.ttlMs) this.restUntil = 0;
        return;
      }
      const { rows } = await sql<{ holder: string; mine: boolean }>`
        insert into singleton_leases as l (name, holder, expires_at, acquired_at)
          values (${this.name}, ${me}, clock_timestamp() + make_interval(secs => ${this.options.ttlMs / 1000}), clock_timestamp())
        on conflict (name) do update
          set holder = excluded.holder, expires_at = excluded.expires_at,
              acquired_at = case when l.holder = excluded.holder then l.acquired_at else excluded.acquired_at end
          where l.holder = excluded.holder or l.expires_at < clock_timestamp()
        returning l.holder, true as mine`.execute(this.db);
      mine = rows.length > 0;
      if (!mine) {
        const current = await sql<{ holder: string }>`select holder from singleton_leases where name = ${this.name}`.execute(this.db);
        this.seenHolder = current.rows[0]?.holder;
      }
    } catch {
      // The store did not answer: the give-up deadline (tick) decides when a holder stops.
      return;
    }
    // Standing down (or resting): a renewal sent before does not take the lease back.
    if (this.closed || this.standingDown !== undefined || performance.now() < this.restUntil) return;
    if (mine) {
      // A renewal that comes back after the deadline passed does not revive a lost lease by itself:
      // it was sent late, so it counts only from when it was sent.
      this.renewedAt = sent;
      this.seenHolder = me;
      if (!this.isHeld && performance.now() - sent <= this.options.ttlMs / 2) {
        this.isHeld = true;
        this.upAt = performance.now();
        this.options.onAcquired?.();
      }
    } else if (this.isHeld) {
      this.lose();
    }
  }

  private lose(): void {
    if (!this.isHeld) return;
    this.isHeld = false;
    Promise.resolve(this.options.onLost?.()).catch(() => undefined);
  }
}
