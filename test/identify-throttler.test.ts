import { describe, expect, it } from 'vitest';
import { AbortableIdentifyThrottler } from '../src/platforms/discord/identify-throttler.js';

/**
 * The gateway's identify throttle (src/platforms/discord/identify-throttler.ts): one identify per
 * 5 s per bucket, and a wait that ends as soon as its shard closes, so the shard never identifies
 * on a connection opened meanwhile.
 */
describe('the identify throttle', () => {
  it('lets the first identify go at once, and ends a later one’s wait the moment its shard closes', async () => {
    const throttler = new AbortableIdentifyThrottler(1);
    const first = Date.now();
    await throttler.waitForIdentify(0, new AbortController().signal);
    expect(Date.now() - first).toBeLessThan(500);
    // The next identify of the bucket must wait its 5 s; its shard closes after 100 ms.
    const closed = new AbortController();
    const started = Date.now();
    setTimeout(() => closed.abort(), 100);
    await expect(throttler.waitForIdentify(0, closed.signal)).rejects.toThrow();
    // discord.js's own (SimpleIdentifyThrottler) sleeps the whole 5 s out here, whatever the signal says.
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('keeps buckets apart: a shard of another bucket does not wait', async () => {
    const throttler = new AbortableIdentifyThrottler(2);
    await throttler.waitForIdentify(0, new AbortController().signal);
    const started = Date.now();
    await throttler.waitForIdentify(1, new AbortController().signal);
    expect(Date.now() - started).toBeLessThan(500);
  });
});
