import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { WorkerMetrics } from '../src/outbox/outbox.metrics.js';
import { backoffMs, OutboxWorker, type Job, type JobKind, type JobQueue, type Lease } from '../src/outbox/worker.js';
import { waitFor } from './support/wait.js';

interface FakeJob extends Job {
  attempts: number;
}

/** A queue in memory: due jobs are claimed in order, each claim counts an attempt. */
class FakeQueue implements JobQueue<FakeJob> {
  readonly jobs: { id: string; kind: string; attempts: number; owner: string | undefined; done: boolean }[] = [];
  released = 0;
  prunes = 0;
  claims: { kinds: readonly string[]; limit: number }[] = [];

  add(kind: string, n = 1): void {
    for (let i = 0; i < n; i++) this.jobs.push({ id: `${kind}-${this.jobs.length}`, kind, attempts: 0, owner: undefined, done: false });
  }
  async claim(owner: string, _now: Date, _leaseMs: number, kinds: readonly string[], limit: number): Promise<FakeJob[]> {
    this.claims.push({ kinds, limit });
    const due = this.jobs.filter((j) => !j.done && j.owner === undefined && kinds.includes(j.kind)).slice(0, limit);
    for (const j of due) {
      j.owner = owner;
      j.attempts += 1;
    }
    return due.map((j) => ({ id: j.id, kind: j.kind, attempts: j.attempts }));
  }
  async release(owner: string): Promise<number> {
    const mine = this.jobs.filter((j) => j.owner === owner && !j.done);
    for (const j of mine) j.owner = undefined;
    this.released += mine.length;
    return mine.length;
  }
  async prune(): Promise<number> {
    this.prunes += 1;
    return 0;
  }
  readonly name = 'fake';
  async oldestDue(): Promise<Date | null> {
    return null;
  }
  readonly quarantined: { id: string; reason: string }[] = [];
  async quarantine(job: FakeJob, lease: Lease, reason: string): Promise<boolean> {
    const j = this.jobs.find((x) => x.id === job.id && x.owner === lease.owner);
    if (j === undefined) return false;
    this.quarantined.push({ id: j.id, reason });
    this.finish(j.id);
    return true;
  }
  finish(id: string): void {
    const j = this.jobs.find((x) => x.id === id);
    if (j !== undefined) {
      j.done = true;
      j.owner = undefined;
    }
  }
}

const clock = { now: () => new Date() };
const log = pino({ level: 'silent' });
const options = { leaseMs: 10_000, pollMs: 5_000, concurrency: 4, shutdownGraceMs: 1_000 };

function kind(name: string, handle: JobKind<FakeJob>['handle'], extra: Partial<JobKind<FakeJob>> = {}): JobKind<FakeJob> {
  return { kind: name, retry: { maxAttempts: 3, baseMs: 100 }, handle, ...extra };
}

describe('the outbox worker', () => {
  it('runs every due job of its registered kinds, more than one batch, and only those kinds', async () => {
    const queue = new FakeQueue();
    queue.add('a', 10);
    queue.add('unregistered', 2);
    const ran: string[] = [];
    const worker = new OutboxWorker(queue, clock, log, options).register(
      kind('a', async (job) => {
        ran.push(job.id);
        queue.finish(job.id);
      }),
    );
    worker.start();
    try {
      // The pool holds 4: the rest are claimed as finished jobs wake the loop, not by polling (5 s).
      await waitFor(() => ran.length === 10, 'ten jobs', 3_000);
      expect(queue.jobs.filter((j) => j.kind === 'unregistered').every((j) => j.attempts === 0)).toBe(true);
    } finally {
      await worker.stop();
    }
  });

  it('runs the kinds of several queues in one loop, each claimed from its own queue, and releases and prunes them all', async () => {
    const deliveries = new FakeQueue();
    const scrapes = new FakeQueue();
    deliveries.add('post', 6);
    scrapes.add('scrape', 6);
    const ran: string[] = [];
    const finishIn = (queue: FakeQueue) => async (job: FakeJob) => {
      ran.push(job.id);
      queue.finish(job.id);
    };
    const worker = new OutboxWorker<FakeJob>(undefined, clock, log, options).register(kind('post', finishIn(deliveries)), deliveries).register(kind('scrape', finishIn(scrapes)), scrapes);
    worker.start();
    try {
      await waitFor(() => ran.length === 12, 'every job of both queues', 3_000);
      expect(deliveries.claims.every((c) => c.kinds.join() === 'post')).toBe(true);
      expect(scrapes.claims.every((c) => c.kinds.join() === 'scrape')).toBe(true);
      await worker.prune();
      expect([deliveries.prunes, scrapes.prunes]).toEqual([1, 1]);
    } finally {
      await worker.stop();
    }
    expect(deliveries.jobs.every((j) => j.done) && scrapes.jobs.every((j) => j.done)).toBe(true);
  });

  it('keeps a kind within its own concurrency, apart from the shared pool', async () => {
    const queue = new FakeQueue();
    queue.add('serial', 5);
    queue.add('pooled', 5);
    let serialNow = 0;
    let serialMax = 0;
    const worker = new OutboxWorker(queue, clock, log, options)
      .register(
        kind(
          'serial',
          async (job) => {
            serialNow += 1;
            serialMax = Math.max(serialMax, serialNow);
            await new Promise((r) => setTimeout(r, 20));
            serialNow -= 1;
            queue.finish(job.id);
          },
          { concurrency: 1 },
        ),
      )
      .register(kind('pooled', async (job) => queue.finish(job.id)));
    worker.start();
    try {
      await waitFor(() => queue.jobs.every((j) => j.done), 'every job', 3_000);
      expect(serialMax).toBe(1);
      expect(queue.claims.some((c) => c.kinds.length === 1 && c.kinds[0] === 'serial' && c.limit === 1)).toBe(true);
      expect(queue.claims.some((c) => c.kinds.includes('pooled') && !c.kinds.includes('serial'))).toBe(true);
    } finally {
      await worker.stop();
    }
  });

  it("aborts a job's signal a second before its lease ends", async () => {
    const queue = new FakeQueue();
    queue.add('slow');
    let abortedAfter: number | undefined;
    const started = Date.now();
    const worker = new OutboxWorker(queue, clock, log, { ...options, leaseMs: 1_300 }).register(
      kind('slow', async (job, ctx) => {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
        abortedAfter = Date.now() - started;
        queue.finish(job.id);
      }),
    );
    worker.start();
    try {
      await waitFor(() => abortedAfter !== undefined, 'the abort', 3_000);
      expect(abortedAfter).toBeGreaterThanOrEqual(250);
      expect(abortedAfter).toBeLessThan(1_300);
    } finally {
      await worker.stop();
    }
  });

  it('on stop lets in-flight jobs finish within the grace period, aborts the rest after it, and releases them', async () => {
    const queue = new FakeQueue();
    queue.add('quick');
    queue.add('stuck');
    let quickDone = false;
    let stuckAborted = false;
    const worker = new OutboxWorker(queue, clock, log, { ...options, shutdownGraceMs: 300 })
      .register(
        kind('quick', async (job) => {
          await new Promise((r) => setTimeout(r, 100));
          quickDone = true;
          queue.finish(job.id);
        }),
      )
      .register(
        kind('stuck', async (_job, ctx) => {
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
          stuckAborted = true;
        }),
      );
    worker.start();
    await waitFor(() => queue.jobs.every((j) => j.owner !== undefined || j.done), 'both claimed', 3_000);
    await worker.stop();
    expect(quickDone).toBe(true);
    expect(stuckAborted).toBe(true);
    expect(queue.released).toBe(1);
    expect(worker.running).toBe(false);
  });

  it('logs a failing handler and keeps working', async () => {
    const queue = new FakeQueue();
    queue.add('bad');
    const lines: { msg?: string; job?: string }[] = [];
    const seen = pino({ level: 'error' }, { write: (line: string) => void lines.push(JSON.parse(line) as { msg?: string; job?: string }) });
    const ran: string[] = [];
    const worker = new OutboxWorker(queue, clock, seen, options)
      .register(
        kind('bad', async (job) => {
          queue.finish(job.id);
          throw new Error('boom');
        }),
      )
      .register(kind('good', async (job) => void (ran.push(job.id), queue.finish(job.id))));
    worker.start();
    try {
      // The failure is logged, naming the job.
      await waitFor(() => lines.some((l) => l.job === 'bad-0'), 'the failure logged', 3_000);
      expect(lines.find((l) => l.job === 'bad-0')?.msg).toBe('job bookkeeping failed');
      // A job enqueued only after the failure (and a notification, as the store sends) still runs.
      queue.add('good');
      worker.wake();
      await waitFor(() => ran.length === 1, 'the job enqueued after the failure', 3_000);
      expect(ran).toEqual(['good-1']);
      expect(worker.running).toBe(true);
    } finally {
      await worker.stop();
    }
  });

  it("gives each job its kind's retry time, and runs the queue's upkeep on its cadence", async () => {
    const queue = new FakeQueue();
    queue.add('r');
    let retryAt: Date | undefined;
    const worker = new OutboxWorker(queue, clock, log, { ...options, pruneEveryMs: 60_000 }).register(
      kind('r', async (job, ctx) => {
        retryAt = ctx.retryAt(2_000);
        queue.finish(job.id);
      }),
    );
    const before = Date.now();
    worker.start();
    try {
      await waitFor(() => retryAt !== undefined, 'the job', 3_000);
      // retryAfter wins over a smaller backoff.
      expect(retryAt!.getTime() - before).toBeGreaterThanOrEqual(2_000);
      expect(queue.prunes).toBe(1);
    } finally {
      await worker.stop();
    }
  });

  it("counts a queue's failing prune by queue (an alert) and still claims in that round", async () => {
    const queue = new FakeQueue();
    queue.prune = async () => Promise.reject(new Error('prune failed'));
    queue.add('r');
    const registry = new Registry();
    const ran: string[] = [];
    const worker = new OutboxWorker(queue, clock, log, { ...options, pruneEveryMs: 60_000, metrics: new WorkerMetrics(registry) }).register(
      kind('r', async (job) => {
        ran.push(job.id);
        queue.finish(job.id);
      }),
    );
    expect(await registry.getSingleMetricAsString('herald_periodic_work_failures_total')).toContain('{what="queue fake"} 0');
    worker.start();
    try {
      await waitFor(() => ran.length === 1, 'the job', 3_000);
      expect(await registry.getSingleMetricAsString('herald_periodic_work_failures_total')).toContain('{what="queue fake"} 1');
    } finally {
      await worker.stop();
    }
  });

  it('quarantines a job that throws on its own content at once, one that throws anything else on its last attempt, and never one whose store is unreachable', async () => {
    const queue = new FakeQueue();
    queue.add('own');
    queue.add('last');
    queue.add('down');
    const registry = new Registry();
    const thrown: string[] = [];
    const worker = new OutboxWorker(queue, clock, log, { ...options, metrics: new WorkerMetrics(registry) })
      .register(kind('own', async () => void JSON.parse('{secret')))
      .register(kind('last', async () => Promise.reject(new Error('odd')), { retry: { maxAttempts: 1, baseMs: 10 } }))
      .register(
        kind('down', async (job) => {
          thrown.push(job.id);
          throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
        }),
      );
    worker.start();
    try {
      await waitFor(() => queue.quarantined.length === 2 && thrown.length === 1, 'two quarantined, one thrown', 3_000);
      expect(queue.quarantined.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
        { id: 'last-1', reason: 'quarantined: handling this job threw on each of its 1 attempts (Error)' },
        { id: 'own-0', reason: 'quarantined: handling this job threw on its own content (SyntaxError)' },
      ]);
      expect(queue.jobs.find((j) => j.id === 'down-2')?.done).toBe(false);
      expect(await registry.getSingleMetricAsString('herald_outbox_jobs_quarantined_total')).toMatch(/kind="own"} 1[\s\S]*kind="last"} 1[\s\S]*kind="down"} 0/);
    } finally {
      await worker.stop();
    }
  });

  it('backs off with full jitter under a doubling, capped ceiling', () => {
    const policy = { maxAttempts: 10, baseMs: 100, capMs: 1_000 };
    for (let i = 0; i < 200; i++) {
      expect(backoffMs(policy, 1)).toBeLessThanOrEqual(100);
      expect(backoffMs(policy, 3)).toBeLessThanOrEqual(400);
      expect(backoffMs(policy, 30)).toBeLessThanOrEqual(1_000);
      expect(backoffMs(policy, 1)).toBeGreaterThanOrEqual(1);
    }
  });
});
