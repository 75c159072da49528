import { setTimeout as sleep } from 'node:timers/promises';

/** Discord lets a bot identify once per 5 s per concurrency bucket (https://discord.com/developers/docs/events/gateway#session-start-limit-object). */
const IDENTIFY_EVERY_MS = 5_000;

/**
 * discord.js's identify throttle, with waits that end when the shard closes. The one @discordjs/ws
 * builds by default (SimpleIdentifyThrottler) sleeps out the 5 s without looking at its signal: a
 * shard whose connection closes and reconnects meanwhile then sends its identify on the new
 * connection before it is open, from a promise nobody awaits. Node ends a process on such an
 * unhandled rejection, and the test suite saw it. Here the wait rejects once the signal aborts, and
 * the shard, seeing its signal aborted, identifies on its next connection instead.
 */
export class AbortableIdentifyThrottler {
  private readonly buckets = new Map<number, { turn: Promise<void>; resetsAt: number }>();

  constructor(private readonly maxConcurrency: number) {}

  async waitForIdentify(shardId: number, signal: AbortSignal): Promise<void> {
    const key = shardId % Math.max(1, this.maxConcurrency);
    const bucket = this.buckets.get(key) ?? { turn: Promise.resolve(), resetsAt: 0 };
    this.buckets.set(key, bucket);
    // One identify at a time per bucket, in the order asked.
    const previous = bucket.turn;
    let done: () => void = () => undefined;
    bucket.turn = new Promise<void>((resolve) => (done = resolve));
    try {
      await previous;
      signal.throwIfAborted();
      const wait = bucket.resetsAt - Date.now();
      if (wait > 0) await sleep(wait + Math.random() * 1_500, undefined, { signal });
      signal.throwIfAborted();
      bucket.resetsAt = Date.now() + IDENTIFY_EVERY_MS;
    } finally {
      done();
    }
  }
}
