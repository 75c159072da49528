import { sql, type Kysely } from 'kysely';
import { pause, type Pacer } from '../../infra/db/shared-pacer.js';

/**
 * Slack's rate limits, as budgets Herald spaces its requests to: chat.postMessage about one message
 * per second per channel, every other method by its tier (requests per minute per workspace, with
 * short bursts allowed). A 429 is still honoured (its Retry-After reschedules the job): the budgets
 * only keep Herald from asking for one.
 */
export interface Budget {
  /** Requests per second, on average. */
  readonly perSecond: number;
  /** How many may start at once after a quiet spell (1: strictly spaced). */
  readonly burst: number;
}

/** Slack's published tiers: requests per minute per method per workspace (https://api.slack.com/apis/rate-limits). */
export const TIER_LIMITS = { 2: 20, 3: 50, 4: 100 } as const;

/**
 * Herald's budget for each tier. A budget with a burst B and a rate r lets at most B + r·W requests
 * start in any window of W seconds, so B + 60·r stays one under the tier's count: whichever minute
 * Slack counts (a fixed window or a sliding one), Herald never asks for more than it allows.
 */
const TIERS = {
  2: { perSecond: 15 / 60, burst: 4 },
  3: { perSecond: 40 / 60, burst: 9 },
  4: { perSecond: 80 / 60, burst: 19 },
} as const satisfies Record<keyof typeof TIER_LIMITS, Budget>;

/** The most requests a budget lets start in any window of `seconds`. */
export function mostIn(budget: Budget, seconds: number): number {
  return Math.max(1, budget.burst) + budget.perSecond * seconds;
}

/** The tier of each method Herald calls (chat.postMessage has its own per-channel budget). */
const METHOD_TIER: Readonly<Record<string, keyof typeof TIERS>> = {
  'auth.test': 4,
  'chat.update': 3,
  'chat.getPermalink': 4,
  'conversations.history': 3,
  'conversations.info': 3,
  'conversations.list': 2,
  'conversations.members': 4,
  'conversations.open': 3,
  'conversations.create': 2,
  'conversations.join': 3,
  'users.info': 4,
};

/** The tier budget of a method; undefined for methods Herald does not pace (Slack's default is Tier 3). */
export function tierOf(method: string): { tier: number; budget: Budget } {
  const tier = METHOD_TIER[method] ?? 3;
  return { tier, budget: TIERS[tier] };
}

/**
 * A budget spread over every process on one database (PostgreSQL), or this process alone (PGlite,
 * which only one process opens): a request takes the next start time of a GCRA with a burst
 * allowance, kept as one row of `rate_budgets`, and waits for it. A dead process holds nothing: the
 * start times it took simply pass. If the database cannot be asked, the request goes ahead unpaced
 * (Slack's 429 still stops it) rather than waiting on the store.
 */
export function burstPacerFor(store: { kind: 'postgres' | 'pglite'; db: Kysely<unknown> }, key: string, budget: Budget): Pacer {
  return store.kind === 'postgres' ? new SharedBurstPacer(store.db, key, budget) : new LocalBurstPacer(budget);
}

/** The same budget within one process. */
export class LocalBurstPacer implements Pacer {
  /** When the budget is next free, in performance.now() milliseconds (the "theoretical arrival time"). */
  private next = 0;
  private readonly intervalMs: number;
  private readonly allowanceMs: number;

  constructor(budget: Budget) {
    this.intervalMs = 1000 / budget.perSecond;
    this.allowanceMs = (Math.max(1, budget.burst) - 1) * this.intervalMs;
  }

  async acquire(signal?: AbortSignal): Promise<void> {
    const now = performance.now();
    const start = Math.max(this.next - this.allowanceMs, now);
    this.next = Math.max(this.next, now) + this.intervalMs;
    try {
      await pause(start - now, signal);
    } catch (err) {
      // An abandoned wait gives its turn back: the budget only runs ahead for requests that will go.
      this.next = Math.max(this.next - this.intervalMs, performance.now());
      throw err;
    }
  }
}

/** How far ahead of the clock a shared budget's turns may be taken, at most (beyond its burst). */
const HORIZON_SECONDS = 10;

/** The budget shared through the database; its clock decides, so the processes' clocks may disagree. */
export class SharedBurstPacer implements Pacer {
  private readonly intervalSeconds: number;
  private readonly allowanceSeconds: number;
  /** How far ahead of the clock turns may be taken (at least the burst's). */
  private readonly horizonSeconds: number;
  /** Requests that went ahead unpaced because the store did not answer. */
  unpaced = 0;

  constructor(
    private readonly db: Kysely<unknown>,
    private readonly key: string,
    budget: Budget,
  ) {
    this.intervalSeconds = 1 / budget.perSecond;
    this.allowanceSeconds = (Math.max(1, budget.burst) - 1) * this.intervalSeconds;
    this.horizonSeconds = Math.max(HORIZON_SECONDS, this.allowanceSeconds + this.intervalSeconds);
  }

  async acquire(signal?: AbortSignal): Promise<void> {
    let waitMs: number;
    for (;;) {
      if (signal?.aborted === true) throw signal.reason ?? new Error('aborted');
      let taken: { wait_ms: number | string } | undefined;
      let aheadMs = 0;
      try {
        // next_at moves one interval past max(next_at, now); this request starts one interval (and
        // the burst allowance) before the new next_at, or now if that has passed. Turns are taken
        // at most HORIZON ahead of the clock: a process killed while its requests waited leaves
        // its turns taken, and they must not hold the budget for longer than that.
        const { rows } = await sql<{ wait_ms: number | string }>`
          insert into rate_budgets as b (key, next_at) values (${this.key}, clock_timestamp() + make_interval(secs => ${this.intervalSeconds}))
          on conflict (key) do update set next_at = greatest(b.next_at, clock_timestamp()) + make_interval(secs => ${this.intervalSeconds})
            where b.next_at < clock_timestamp() + make_interval(secs => ${this.horizonSeconds})
          returning extract(epoch from (b.next_at - clock_timestamp())) * 1000 - ${(this.intervalSeconds + this.allowanceSeconds) * 1000} as wait_ms`.execute(this.db);
        taken = rows[0];
        if (taken === undefined) {
          const ahead = await sql<{ ahead_ms: number | string }>`
            select extract(epoch from (next_at - clock_timestamp())) * 1000 as ahead_ms from rate_budgets where key = ${this.key}`.execute(this.db);
          aheadMs = Number(ahead.rows[0]?.ahead_ms ?? 0);
        }
      } catch {
        this.unpaced += 1;
        return;
      }
      if (taken !== undefined) {
        waitMs = Math.max(0, Number(taken.wait_ms));
        break;
      }
      // The budget is a full horizon ahead: come back when a turn is within it (no turn is held meanwhile).
      await pause(Math.max(10, aheadMs - this.horizonSeconds * 1000 + 10), signal);
    }
    try {
      await pause(waitMs, signal);
    } catch (err) {
      await this.giveBack();
      throw err;
    }
  }

  /**
   * Give back a turn taken by a request that will not go (its wait was aborted): next_at moves one
   * interval back, never behind the clock. Without this, abandoned waits would push the budget ever
   * further ahead of the requests actually sent, and starve it. The turn given back is the last one
   * taken, not necessarily this one: the count of turns ahead is what matters.
   */
  private async giveBack(): Promise<void> {
    try {
      await sql`
        update rate_budgets as b set next_at = greatest(b.next_at - make_interval(secs => ${this.intervalSeconds}), clock_timestamp())
        where b.key = ${this.key}`.execute(this.db);
    } catch {
      // The store did not answer: the turn simply passes unused.
    }
  }
}
