import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../infra/clock.js';
import { errorSummary } from '../infra/errors.js';
import { fenceUntil, LeaseLostError, withFence, type Fence } from '../infra/faults/fence.js';
import { isStoreUnavailable } from '../infra/db/database.js';
import { faultName, isRowsOwnFault } from './failure-rule.js';
import { DeepScans, type LaneRoom } from './lanes.js';
import type { QueueDepth, WorkerMetrics } from './outbox.metrics.js';

/** What the worker needs of a job; the job's own table holds the rest. */
export interface Job {
  readonly id: string;
  readonly kind: string;
  /** Attempts so far, this one included (the claim counts it). */
  readonly attempts: number;
  /** What paces this job's sends together with others' (src/outbox/lanes.ts); absent: nothing. */
  readonly lane?: string;
  /** The claim's own token (its row's lease_token): a write of its outcome names it (see `Lease`). */
  readonly leaseToken?: string | null;
}

/**
 * Who holds a job's lease: the worker, and the claim's token. A claim writes a new token in the
 * row, so an outcome written under an older claim (a process that stalled past its lease, even this
 * same worker's earlier attempt) matches no row and changes nothing.
 */
export interface Lease {
  readonly owner: string;
  readonly token: string | null;
}

/**
 * Where jobs wait: a table whose rows are their own outbox entries. `claim` leases due rows
 * (`FOR UPDATE SKIP LOCKED`, so any number of workers share one database) and counts the attempt;
 * a row whose lease expired (its worker died) is due again.
 */
export interface JobQueue<J extends Job> {
  /** Its name in metrics and /readyz (its table's). */
  readonly name: string;
  /**
   * Oldest first. `lanes`: the jobs this worker runs per lane and how many a lane may run; a queue
   * whose rows have lanes claims fairly across them (src/outbox/lanes.ts), others ignore it.
   */
  claim(owner: string, now: Date, leaseMs: number, kinds: readonly string[], limit: number, lanes?: LaneRoom): Promise<J[]>;
  /** On shutdown: hand this owner's leased rows back, due now. */
  release(owner: string, now: Date): Promise<number>;
  /**
   * Set a job aside for good, while `owner` holds its lease: its handling threw for a reason of its
   * own row (src/outbox/failure-rule.ts, `isRowsOwnFault`) or kept throwing to its last attempt.
   * The row ends `failed` (or its queue's word for it) with `reason`, so it never again waits in
   * front of the others. False: the lease was lost meanwhile, nothing written.
   */
  quarantine(job: J, lease: Lease, reason: string): Promise<boolean>;
  /**
   * Since when the oldest due job has been due (null: none is): a queue that stopped moving shows
   * here first (herald_queue_oldest_due_age_seconds, /readyz), whatever stopped it.
   */
  oldestDue(now: Date): Promise<Date | null>;
  /** Periodic upkeep, e.g. deleting rows past retention. */
  prune?(now: Date): Promise<number>;
  /** For metrics: how many jobs wait, by kind and state, read within `timeoutMs`. */
  depth?(now: Date, timeoutMs: number): Promise<QueueDepth[]>;
}

export type { QueueDepth } from './outbox.metrics.js';

/** Retry timing of a job kind: full-jitter exponential backoff, capped. */
export interface RetryPolicy {
  maxAttempts: number;
  baseMs: number;
  capMs?: number;
}

export interface JobContext {
  /** The worker holding the job's lease. */
  readonly owner: string;
  /** The job's lease: outcomes are recorded only under it. */
  readonly lease: Lease;
  /**
   * Holds until shortly before the lease ends (monotonic clock). The job's work runs under it
   * (src/infra/faults/fence.ts): past it no request of the job leaves and no outcome is written.
   */
  readonly fence: Fence;
  /** Aborted just before the lease ends, or when shutdown's grace period is over. */
  readonly signal: AbortSignal;
  /** When the job should be tried again after a transient failure (its kind's policy). */
  retryAt(retryAfterMs?: number): Date;
  readonly retry: RetryPolicy;
}

/** One kind of job, registered by the module that owns it. */
export interface JobKind<J extends Job> {
  readonly kind: string;
  /** Jobs of this kind one process runs at once; absent: they share the worker's pool. */
  readonly concurrency?: number;
  readonly retry: RetryPolicy;
  /** Run one attempt and record its outcome (only while the lease is held). */
  handle(job: J, context: JobContext): Promise<void>;
}

export interface WorkerOptions {
  leaseMs: number;
  pollMs: number;
  /** Size of the shared pool. */
  concurrency: number;
  /** Jobs of one lane this worker runs at once (default: half the pool, at least 1). */
  perLane?: number;
  shutdownGraceMs: number;
  pruneEveryMs?: number;
  metrics?: WorkerMetrics;
}

const DEFAULT_CAP_MS = 5 * 60 * 1000;

/**
 * How long before its lease ends a job's fence stops it: a request that leaves then still reaches
 * the platform, and is created there, before another process can take the job over (which reads
 * the platform from the lease's end on, src/modules/deliveries/delivery.reconcile.ts).
 */
export function fenceMarginMs(leaseMs: number): number {
  return Math.min(1_000, leaseMs / 4);
}

/** Full-jitter exponential backoff: uniform below min(cap, base·2^(attempts−1)), never below retryAfter. */
export function backoffMs(policy: RetryPolicy, attempts: number, retryAfterMs?: number): number {
  const ceiling = Math.min(policy.capMs ?? DEFAULT_CAP_MS, policy.baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.max(Math.floor(Math.random() * ceiling), retryAfterMs ?? 0, 1);
}

/**
 * The outbox worker: claims due jobs of every registered kind under a lease, runs each kind's
 * handler with a signal that fires before the lease ends, wakes on a notification or polls, prunes,
 * and on stop lets in-flight jobs finish within a grace period before handing the rest back.
 */
export class OutboxWorker<J extends Job> {
  readonly owner = `worker-${randomUUID()}`;
  private readonly kinds = new Map<string, JobKind<J>>();
  /** Which queue each kind's jobs wait in: the worker's own unless the kind was registered with another. */
  private readonly queueOf = new Map<string, JobQueue<J>>();
  private readonly inFlight = new Map<string, { kind: string; lane: string | undefined; done: Promise<void>; abort: AbortController }>();
  private stopping = false;
  private loopDone: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  /** A wake-up that came while the loop was busy: it looks again instead of sleeping. */
  private woken = false;
  private lastPrune = 0;
  private turn = 0;
  /** Each queue's deep claims (src/outbox/lanes.ts): when the last was, and whether they find what shallow ones miss. */
  private readonly scans = new Map<JobQueue<J>, DeepScans>();
  private deepWake: NodeJS.Timeout | undefined;

  /** `queue`: where kinds registered without a queue of their own wait (absent: every kind brings one). */
  constructor(
    private readonly queue: JobQueue<J> | undefined,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly options: WorkerOptions,
  ) {}

  /**
   * Run jobs of `kind`, waiting in `queue` (default: the worker's own). One worker loop can so run
   * the kinds of several queues (deliveries, chat sends, archive scrapes), sharing one pool.
   */
  register<K extends J>(kind: JobKind<K>, queue?: JobQueue<K>): this {
    if (this.loopDone !== undefined) throw new Error('register job kinds before start()');
    if (this.kinds.has(kind.kind)) throw new Error(`job kind ${kind.kind} is registered twice`);
    const q = (queue as JobQueue<J> | undefined) ?? this.queue;
    if (q === undefined) throw new Error(`job kind ${kind.kind} needs a queue`);
    // A kind handles only the jobs its own queue claims for it, so widening K to J is safe.
    this.kinds.set(kind.kind, kind as unknown as JobKind<J>);
    this.queueOf.set(kind.kind, q);
    this.options.metrics?.register(kind.kind);
    // The queue's prune failures have their series (at 0) before the first.
    if (q.prune !== undefined) this.options.metrics?.pruneFailed(q.name, 0);
    return this;
  }

  /** Every queue some registered kind waits in, once each. */
  private queues(): JobQueue<J>[] {
    return [...new Set([...this.queueOf.values(), ...(this.queue !== undefined ? [this.queue] : [])])];
  }

  get running(): boolean {
    return this.loopDone !== undefined && !this.stopping;
  }

  start(): void {
    if (this.loopDone !== undefined) return;
    this.loopDone = this.loop();
  }

  /** Look for due work now (a notification, a finished job). */
  wake(): void {
    const w = this.wakeUp;
    this.wakeUp = undefined;
    if (w === undefined) this.woken = true;
    else w();
  }

  /** Stop claiming; let in-flight jobs finish within the grace period, then release the rest. */
  async stop(): Promise<void> {
    if (this.loopDone === undefined || this.stopping) return;
    this.stopping = true;
    clearTimeout(this.deepWake);
    this.wake();
    await this.loopDone;
    const all = Promise.all([...this.inFlight.values()].map((a) => a.done));
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), this.options.shutdownGraceMs)));
    const result = await Promise.race([all.then(() => 'done' as const), graceOver]);
    clearTimeout(timer);
    if (result === 'timeout') {
      for (const a of this.inFlight.values()) a.abort.abort();
      await all;
    }
    let released = 0;
    for (const q of this.queues()) released += await q.release(this.owner, this.clock.now());
    if (released > 0) this.log.info({ released }, 'released in-flight jobs');
  }

  /**
   * Run the queues' upkeep now. One queue's failing prune is logged and counted (by queue) and
   * does not keep the others from theirs, nor this round from claiming.
   */
  async prune(): Promise<number> {
    let removed = 0;
    for (const q of this.queues()) {
      try {
        removed += (await q.prune?.(this.clock.now())) ?? 0;
      } catch (err) {
        this.options.metrics?.pruneFailed(q.name);
        this.log.error({ err: errorSummary(err), queue: q.name }, 'could not prune a queue');
      }
    }
    if (removed > 0) this.log.info({ removed }, 'pruned old jobs');
    return removed;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      this.woken = false;
      try {
        await this.tick();
      } catch (err) {
        this.options.metrics?.tickFailed();
        this.log.error({ err: errorSummary(err) }, 'worker tick failed');
      }
      if (this.stopping) break;
      if (this.woken) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          // The poll came first: a later wake must find no stale hook (it would be lost).
          this.wakeUp = undefined;
          resolve();
        }, this.options.pollMs);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  private async tick(): Promise<void> {
    const nowMs = this.clock.now().getTime();
    if (this.options.pruneEveryMs !== undefined && nowMs - this.lastPrune >= this.options.pruneEveryMs) {
      this.lastPrune = nowMs;
      await this.prune();
    }
    // Kinds with a concurrency of their own claim apart; the rest share the pool in one claim.
    const pooled: string[] = [];
    for (const kind of this.kinds.values()) {
      if (kind.concurrency === undefined) {
        pooled.push(kind.kind);
        continue;
      }
      const room = kind.concurrency - this.running_(kind.kind);
      if (room > 0) await this.claimAndLaunch([kind.kind], room);
    }
    const poolRoom = this.options.concurrency - [...this.inFlight.values()].filter((a) => this.kinds.get(a.kind)?.concurrency === undefined).length;
    if (pooled.length > 0 && poolRoom > 0) await this.claimAndLaunch(pooled, poolRoom);
  }

  private running_(kind: string): number {
    let n = 0;
    for (const a of this.inFlight.values()) if (a.kind === kind) n += 1;
    return n;
  }

  private async claimAndLaunch(kinds: readonly string[], limit: number): Promise<void> {
    // Each queue is asked for its own kinds; the room left shrinks as jobs are launched.
    let room = limit;
    // The queue asked first changes every claim, so one busy queue cannot starve the others.
    const all = this.queues();
    const first = this.turn++ % Math.max(1, all.length);
    for (const q of [...all.slice(first), ...all.slice(0, first)]) {
      const mine = kinds.filter((k) => this.queueOf.get(k) === q);
      if (mine.length === 0 || room <= 0) continue;
      for (let again = true; again && room > 0; ) {
        // The lease runs from before the claim: on the monotonic clock as on the one it is written with.
        const claimedAt = performance.now();
        const lanes = this.lanes(q);
        const jobs = await q.claim(this.owner, this.clock.now(), this.options.leaseMs, mine, room, lanes);
        room -= jobs.length;
        // A full batch may leave more due: each finished job wakes the loop, so it looks again.
        for (const job of jobs) this.launch(job, claimedAt);
        // A shallow claim that found nothing while a lane is full: look deep now, or when a deep claim is due.
        const next = this.scansOf(q).claimed(lanes, jobs.map((j) => j.lane));
        again = next.again === true;
        if (next.wakeInMs !== undefined) this.wakeIn(next.wakeInMs);
      }
    }
  }

  /** The jobs running per lane (of every kind: a lane is paced as one), and a lane's share of the pool. */
  private lanes(q: JobQueue<J>): LaneRoom {
    const busy = new Map<string, number>();
    for (const a of this.inFlight.values()) if (a.lane !== undefined) busy.set(a.lane, (busy.get(a.lane) ?? 0) + 1);
    // Per queue: a claim of another queue (which has no lanes) must not use up this one's turn.
    return { busy, perLane: this.options.perLane ?? Math.max(1, Math.ceil(this.options.concurrency / 2)), deep: this.scansOf(q).take() };
  }

  private scansOf(q: JobQueue<J>): DeepScans {
    let scans = this.scans.get(q);
    if (scans === undefined) this.scans.set(q, (scans = new DeepScans()));
    return scans;
  }

  /** Wake the loop in `ms` (one such timer at a time; it holds no process open). */
  private wakeIn(ms: number): void {
    if (this.deepWake !== undefined || this.stopping) return;
    this.deepWake = setTimeout(() => {
      this.deepWake = undefined;
      this.wake();
    }, Math.max(1, Math.ceil(ms)));
    this.deepWake.unref();
  }

  private launch(job: J, claimedAt: number): void {
    const kind = this.kinds.get(job.kind);
    if (kind === undefined) {
      // Claimed only by registered kinds; a row of another kind cannot get here.
      this.log.error({ job: job.id, kind: job.kind }, 'claimed a job of an unregistered kind');
      return;
    }
    const abort = new AbortController();
    // Give up before the lease ends, so no attempt records anything after another could have taken over.
    const timer = setTimeout(() => abort.abort(), Math.max(1, this.options.leaseMs - 1_000));
    const fence = fenceUntil(claimedAt + this.options.leaseMs - fenceMarginMs(this.options.leaseMs), "the job's lease");
    const lease: Lease = { owner: this.owner, token: job.leaseToken ?? null };
    const context: JobContext = {
      owner: this.owner,
      lease,
      fence,
      signal: abort.signal,
      retry: kind.retry,
      retryAt: (retryAfterMs) => new Date(this.clock.now().getTime() + backoffMs(kind.retry, job.attempts, retryAfterMs)),
    };
    const started = performance.now();
    let failed = false;
    this.options.metrics?.started(job.kind);
    const done = withFence(fence, () => kind.handle(job, context))
      .catch(async (err: unknown) => {
        if (err instanceof LeaseLostError) {
          // Stalled past its lease: nothing more left, nothing was written; the next holder re-drives it.
          this.log.warn({ job: job.id, kind: job.kind, fence: err.what }, 'lease ended before the job was done; it stopped, the next holder re-drives it');
          return;
        }
        failed = true;
        if (await this.quarantined(job, kind, err, abort.signal)) return;
        this.log.error({ job: job.id, kind: job.kind, err: errorSummary(err) }, 'job bookkeeping failed');
      })
      .finally(() => {
        this.options.metrics?.finished(job.kind, (performance.now() - started) / 1000, failed);
        clearTimeout(timer);
        this.inFlight.delete(job.id);
        this.wake();
      });
    this.inFlight.set(job.id, { kind: job.kind, lane: job.lane, done, abort });
  }

  /**
   * After a handler threw: a job whose own row is at fault (its content cannot be read or handled),
   * or one that threw on its last attempt for any reason but the store's, is quarantined under its
   * lease, logged (what went wrong, never the row's content) and counted. Otherwise it is re-driven
   * when its lease expires, as before. True: quarantined.
   */
  private async quarantined(job: J, kind: JobKind<J>, err: unknown, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted || isStoreUnavailable(err)) return false;
    const own = isRowsOwnFault(err);
    if (!own && job.attempts < kind.retry.maxAttempts) return false;
    const queue = this.queueOf.get(job.kind);
    const fault = faultName(err);
    const reason = own ? `quarantined: handling this job threw on its own content (${fault})` : `quarantined: handling this job threw on each of its ${job.attempts} attempts (${fault})`;
    const done = await queue?.quarantine(job, { owner: this.owner, token: job.leaseToken ?? null }, reason).catch((e: unknown) => {
      this.log.error({ job: job.id, kind: job.kind, err: errorSummary(e) }, 'could not quarantine a job');
      return false;
    });
    if (done !== true) return false;
    this.options.metrics?.quarantined(job.kind);
    this.log.error({ job: job.id, kind: job.kind, fault, attempts: job.attempts }, 'job quarantined: its handling threw, and it is set aside as failed instead of retried in front of the others');
    return true;
  }
}
