import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { LaneRoom } from '../src/outbox/lanes.js';
import { OutboxWorker, type Job, type JobQueue } from '../src/outbox/worker.js';
import { waitFor } from './support/wait.js';

/**
 * A lane whose rows lie behind another lane's backlog is found by deep claims only
 * (src/outbox/lanes.ts). Found only every LANE_DEEP_SCAN_MS, and only when some job finishing woke
 * the loop, it ran at a fraction of its pace: a Slack workspace's drain beside another's backlog
 * took 2.74× as long (`npm run bench -- --only=slack-identities`). Now a shallow claim that finds
 * nothing while a lane is full is followed by a deep one, at once or when one is due (sooner while
 * deep claims pay). On the code before, b's jobs waited for the next poll: this test timed out.
 */
describe('outbox lanes: work behind a full lane', () => {
  let worker: OutboxWorker<Job> | undefined;
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
  });

  /**
   * A queue of lane `a`'s backlog (older, its jobs never finish) and lane `b`'s jobs behind it:
   * a shallow claim reads only a's rows, as SCAN_DEPTH would, so b's are claimed by deep claims only.
   */
  function queue(bJobs: number) {
    const a = Array.from({ length: 300 }, (_, i) => ({ id: `a${i}`, kind: 'work', attempts: 1, lane: 'a' }));
    const b = Array.from({ length: bJobs }, (_, i) => ({ id: `b${i}`, kind: 'work', attempts: 1, lane: 'b' }));
    const q: JobQueue<Job> = {
      name: 'test',
      claim: async (_owner, _now, _leaseMs, _kinds, limit, lanes?: LaneRoom) => {
        const room = (lane: string) => Math.max(0, (lanes?.perLane ?? limit) - (lanes?.busy.get(lane) ?? 0));
        const taken: Job[] = [];
        taken.push(...a.splice(0, Math.min(limit, room('a'))));
        if (lanes?.deep === true) taken.push(...b.splice(0, Math.min(limit - taken.length, room('b'))));
        return taken;
      },
      release: async () => 0,
      quarantine: async () => true,
      oldestDue: async () => null,
    };
    return { q, left: () => b.length };
  }

  it("runs the jobs behind another lane's full backlog without waiting for a poll", async () => {
    const { q, left } = queue(40);
    const done: string[] = [];
    // Polls far apart: only jobs finishing (and the worker's own wake for a deep claim) move it.
    worker = new OutboxWorker<Job>(q, { now: () => new Date() }, pino({ level: 'silent' }), { leaseMs: 60_000, pollMs: 60_000, concurrency: 4, shutdownGraceMs: 10 });
    worker.register({
      kind: 'work',
      retry: { maxAttempts: 1, baseMs: 1 },
      handle: async (job, context) => {
        // a's jobs hold their lane's slots (a backlog paced by its platform); b's finish at once.
        if (job.lane === 'a') await new Promise((resolve) => context.signal.addEventListener('abort', resolve, { once: true }));
        else done.push(job.id);
      },
    });
    worker.start();
    await waitFor(() => done.length === 40, "b's 40 jobs", 10_000);
    expect(left()).toBe(0);
  });

  // From the attacking helper: a row of the lane that was full, freed while a shallow claim was
  // finding nothing, made the next deep claim count as paying; one agent's flood then multiplied
  // the deep claims' cost (8,192 rows each, 20 ms apart). Fails on that code (payingUntil set).
  it("a lone lane's flood never makes deep claims pay", async () => {
    let next = 0;
    let slowShallow = false;
    const finish = new Map<string, () => void>();
    const q: JobQueue<Job> = {
      name: 'flood',
      claim: async (_owner, _now, _leaseMs, _kinds, limit, lanes?: LaneRoom) => {
        const room = Math.max(0, (lanes?.perLane ?? limit) - (lanes?.busy.get('a') ?? 0));
        if (lanes?.deep !== true && slowShallow) {
          slowShallow = false;
          await new Promise((resolve) => setTimeout(resolve, 60));
        }
        return Array.from({ length: Math.min(limit, room) }, () => ({ id: `a${next++}`, kind: 'work', attempts: 1, lane: 'a' }));
      },
      release: async () => 0,
      quarantine: async () => true,
      oldestDue: async () => null,
    };
    worker = new OutboxWorker<Job>(q, { now: () => new Date() }, pino({ level: 'silent' }), { leaseMs: 60_000, pollMs: 1_000, concurrency: 2, shutdownGraceMs: 10 });
    worker.register({
      kind: 'work',
      retry: { maxAttempts: 1, baseMs: 1 },
      handle: (job, context) =>
        new Promise<void>((resolve) => {
          finish.set(job.id, resolve);
          context.signal.addEventListener('abort', () => resolve(), { once: true });
        }),
    });
    worker.start();
    await waitFor(() => finish.has('a0'), 'the first job', 5_000);
    // Within the first deep claim's period (200 ms), a wake (a notification) starts a slow shallow
    // claim, and a0 finishes meanwhile: the next claim is deep, and takes the lane's next row.
    await new Promise((resolve) => setTimeout(resolve, 130));
    slowShallow = true;
    worker.wake();
    await new Promise((resolve) => setTimeout(resolve, 20));
    finish.get('a0')?.();
    // The worker judges a claim in the same turn as it launches its jobs: once a1 runs, it has.
    await waitFor(() => finish.has('a1'), 'the next job of the lane', 5_000);
    const scans = (worker as unknown as { scans: Map<unknown, { payingUntil: number }> }).scans.get(q);
    expect(scans?.payingUntil ?? -Infinity).toBe(-Infinity);
  });
});
