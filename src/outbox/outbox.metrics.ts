import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Clock } from '../infra/clock.js';
import { addStatusPanels, LATENCY_BUCKETS, periodicFailures, ScrapeRead } from '../infra/metrics.js';

/** How many jobs of a queue wait, by kind and state (a queue's `depth`). */
export interface QueueDepth {
  kind: string;
  /** The queue's own words, e.g. pending, in_flight. */
  state: string;
  jobs: number;
  /** Since when the oldest job of this kind and state has been due; null when none is due yet. */
  oldestDueAt: Date | null;
}

/** The outbox worker's metrics, per job kind (each module's kinds: post, dm, edit, ...). */
export class WorkerMetrics {
  private readonly claimed: Counter<'kind'>;
  private readonly running: Gauge<'kind'>;
  private readonly duration: Histogram<'kind'>;
  private readonly errors: Counter<'kind'>;
  private readonly tickFailures: Counter;
  private readonly quarantines: Counter<'kind'>;
  private readonly periodicFailed: (what: string, times?: number) => void;

  constructor(registry: Registry) {
    const registers = [registry];
    this.claimed = new Counter({ name: 'herald_outbox_jobs_claimed_total', help: 'Jobs claimed under a lease by this process, by job kind', labelNames: ['kind'], registers });
    this.running = new Gauge({ name: 'herald_outbox_jobs_running', help: 'Jobs this process is running now, by job kind', labelNames: ['kind'], registers });
    this.duration = new Histogram({
      name: 'herald_outbox_job_duration_seconds',
      help: 'Time one attempt at a job took, outcome recorded, by job kind',
      labelNames: ['kind'],
      buckets: [...LATENCY_BUCKETS],
      registers,
    });
    this.errors = new Counter({
      name: 'herald_outbox_job_errors_total',
      help: 'Attempts whose handler threw instead of recording an outcome (the job is re-driven when its lease expires), by job kind',
      labelNames: ['kind'],
      registers,
    });
    this.quarantines = new Counter({
      name: 'herald_outbox_jobs_quarantined_total',
      help: 'Jobs set aside as failed because their handling threw on their own row (or on every attempt), instead of being retried in front of the others, by job kind',
      labelNames: ['kind'],
      registers,
    });
    this.periodicFailed = periodicFailures(registry);
    this.tickFailures = new Counter({ name: 'herald_outbox_claim_failures_total', help: 'Worker rounds (claim, prune) that failed, e.g. the database was unreachable', registers });
  }

  /** Kinds the worker runs: their series exist (at 0) before the first job. */
  register(kind: string): void {
    this.claimed.inc({ kind }, 0);
    this.running.set({ kind }, 0);
    this.errors.inc({ kind }, 0);
    this.quarantines.inc({ kind }, 0);
  }

  /** A queue's hourly prune failed (herald_periodic_work_failures_total{what="queue <name>"}). */
  pruneFailed(queue: string, times = 1): void {
    this.periodicFailed(`queue ${queue}`, times);
  }

  quarantined(kind: string): void {
    this.quarantines.inc({ kind });
  }

  started(kind: string): void {
    this.claimed.inc({ kind });
    this.running.inc({ kind });
  }

  finished(kind: string, seconds: number, failed: boolean): void {
    this.running.dec({ kind });
    this.duration.observe({ kind }, seconds);
    if (failed) this.errors.inc({ kind });
  }

  tickFailed(): void {
    this.tickFailures.inc();
  }
}

export interface OutboxHealthOptions {
  /** Job kinds whose series are always present (0 when nothing waits). */
  kinds: readonly string[];
  /** Reuse a reading this long (default 5 s). */
  maxAgeMs?: number;
  /** Give up on a reading after this long (default 1 s). */
  timeoutMs?: number;
}

/**
 * Outbox depth by job kind and state, and how long the oldest due job has waited: read from the
 * database at scrape time through one grouped query, reused for a few seconds and bounded by a
 * timeout, so a scrape neither waits long nor loads the store. A failed read drops the series
 * (and counts the failure) rather than report stale numbers.
 */
export function registerOutboxHealth(registry: Registry, depth: (now: Date, timeoutMs: number) => Promise<QueueDepth[]>, clock: Clock, options: OutboxHealthOptions): void {
  const timeoutMs = options.timeoutMs ?? 1_000;
  const reading = new ScrapeRead(async () => ({ at: clock.now(), rows: await depth(clock.now(), timeoutMs) }), { maxAgeMs: options.maxAgeMs ?? 5_000, timeoutMs });
  const failures = new Counter({ name: 'herald_outbox_depth_read_failures_total', help: 'Scrapes whose read of the outbox depth failed or timed out', registers: [registry] });
  new Gauge({
    name: 'herald_outbox_jobs',
    help: 'Jobs in the outbox by job kind and state: pending (waiting or due), in_flight (leased), unknown (in doubt, waiting for a re-POST)',
    labelNames: ['kind', 'state'],
    registers: [registry],
    async collect() {
      const r = await reading.get();
      this.reset();
      if (r === undefined) return failures.inc();
      for (const kind of options.kinds) for (const state of ['pending', 'in_flight', 'unknown']) this.set({ kind, state }, 0);
      for (const row of r.rows) this.set({ kind: row.kind, state: row.state }, row.jobs);
    },
  });
  new Gauge({
    name: 'herald_outbox_oldest_due_age_seconds',
    help: 'How long the oldest due job (pending and due, or leased with an expired lease) has been waiting, by job kind; 0 when none is due',
    labelNames: ['kind'],
    registers: [registry],
    async collect() {
      const r = await reading.get();
      this.reset();
      if (r === undefined) return;
      const ages = new Map(options.kinds.map((k) => [k, 0]));
      for (const row of r.rows) {
        const age = row.oldestDueAt === null ? 0 : Math.max(0, (r.at.getTime() - row.oldestDueAt.getTime()) / 1000);
        ages.set(row.kind, Math.max(ages.get(row.kind) ?? 0, age));
      }
      for (const [kind, age] of ages) this.set({ kind }, age);
    },
  });
  addStatusPanels(
    registry,
    { section: 'outbox', title: 'Depth (pending + in flight)', metric: 'herald_outbox_jobs', show: 'sum', where: (l) => l['state'] !== 'unknown' },
    { section: 'outbox', title: 'Oldest due job waiting', metric: 'herald_outbox_oldest_due_age_seconds', show: 'max', unit: ' s' },
    { section: 'outbox', title: 'In doubt (unknown), stored', metric: 'herald_outbox_jobs', show: 'sum', where: (l) => l['state'] === 'unknown' },
  );
}

/** A queue as its age is read: its name and since when its oldest due job has been due. */
export interface AgedQueue {
  readonly name: string;
  oldestDue(now: Date): Promise<Date | null>;
}

/** How long each queue's oldest due job has waited, in seconds (0: none is due); undefined when the store did not answer in time. */
export type QueueAges = () => Promise<Readonly<Record<string, number>> | undefined>;

/**
 * herald_queue_oldest_due_age_seconds{queue}, for every queue (deliveries, inbox pushes, archive
 * scrapes): the one signal that a queue stopped moving, whatever stopped it (no dispatcher, a
 * failing platform, a row the claim cannot get past). Read at scrape time like the outbox depth
 * (reused for a few seconds, bounded by a timeout); the same reading answers /readyz.
 */
export function registerQueueAges(registry: Registry, queues: readonly AgedQueue[], clock: Clock, options: { maxAgeMs?: number; timeoutMs?: number } = {}): QueueAges {
  const read = async (): Promise<Record<string, number>> => {
    const now = clock.now();
    const ages: Record<string, number> = {};
    for (const q of queues) {
      const at = await q.oldestDue(now);
      ages[q.name] = Math.max(ages[q.name] ?? 0, at === null ? 0 : Math.max(0, (now.getTime() - at.getTime()) / 1000));
    }
    return ages;
  };
  const reading = new ScrapeRead(read, { maxAgeMs: options.maxAgeMs ?? 5_000, timeoutMs: options.timeoutMs ?? 1_000 });
  new Gauge({
    name: 'herald_queue_oldest_due_age_seconds',
    help: 'How long the oldest due job of each queue (deliveries, inbox pushes, archive scrapes) has been waiting; 0 when none is due',
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      const ages = await reading.get();
      this.reset();
      for (const [queue, age] of Object.entries(ages ?? {})) this.set({ queue }, age);
    },
  });
  return () => reading.get();
}
