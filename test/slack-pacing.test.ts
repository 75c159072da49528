import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { SlackSandbox } from '../src/platforms/slack/sandbox/sandbox.js';
import { RateLimits } from '../src/platforms/slack/sandbox/limits.js';
import { SlackApi } from '../src/platforms/slack/slack-client.js';
import { LocalBurstPacer, mostIn, TIER_LIMITS, tierOf } from '../src/platforms/slack/slack-pacer.js';
import { TransportError } from '../src/platforms/platform.js';

/** The request's turn in the budget is waited for before its timeout starts, and a request that never left is never in doubt. */
describe('Slack calls paced before they start', () => {
  const sandbox = new SlackSandbox();
  beforeAll(() => sandbox.start(0, '127.0.0.1'));
  afterAll(() => sandbox.close());

  it('a wait for the budget longer than the request timeout does not time the request out', async () => {
    let waited = 0;
    const api = new SlackApi({
      token: sandbox.botToken,
      apiUrl: sandbox.apiUrl,
      timeoutMs: 300,
      pace: async () => {
        const t0 = performance.now();
        await new Promise((r) => setTimeout(r, 600));
        waited = performance.now() - t0;
      },
    });
    const before = sandbox.calls('auth.test');
    const me = await api.call('auth.test', {});
    expect(me.ok).toBe(true);
    expect(waited).toBeGreaterThan(300);
    expect(sandbox.calls('auth.test')).toBe(before + 1);
  });

  it('a create aborted while waiting for its turn was not sent and may not have created anything', async () => {
    const api = new SlackApi({
      token: sandbox.botToken,
      apiUrl: sandbox.apiUrl,
      timeoutMs: 5_000,
      pace: (_method, _args, signal) =>
        new Promise<void>((_resolve, reject) => {
          signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
        }),
    });
    const before = sandbox.calls('chat.postMessage');
    const err = await api.call('chat.postMessage', { channel: 'C0GENERAL01', text: 'never' }, { signal: AbortSignal.timeout(100) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    const { failure } = err as TransportError;
    expect(failure.kind).toBe('transient');
    expect(failure.detail).toMatch(/not sent/);
    expect(failure).not.toHaveProperty('mayHaveCreated');
    expect(sandbox.calls('chat.postMessage')).toBe(before);
  });

  it('the sandbox leaves idle connections to the client (no keep-alive timeout for a client to race)', async () => {
    const res = await fetch(`${sandbox.apiUrl}auth.test`, { method: 'POST', headers: { authorization: `Bearer ${sandbox.botToken}` } });
    await res.text();
    expect(res.headers.get('keep-alive')).toBeNull();
  });
});

describe('Slack budgets', () => {
  afterEach(() => vi.useRealTimers());

  it('a tier budget never admits more than the tier allows in any minute', async () => {
    for (const [tier, limit] of Object.entries(TIER_LIMITS)) {
      const method = { 2: 'conversations.list', 3: 'conversations.history', 4: 'users.info' }[Number(tier) as 2 | 3 | 4];
      const { budget } = tierOf(method);
      expect(mostIn(budget, 60)).toBeLessThan(limit);
    }
    // The Tier 3 budget with a backlog, on a simulated clock: count the starts in every 60 s window.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const pacer = new LocalBurstPacer(tierOf('conversations.history').budget);
    const starts: number[] = [];
    const all = Promise.all(Array.from({ length: 200 }, () => pacer.acquire().then(() => starts.push(performance.now()))));
    await vi.advanceTimersByTimeAsync(400_000);
    await all;
    starts.sort((a, b) => a - b);
    let most = 0;
    for (let i = 0, j = 0; i < starts.length; i++) {
      while ((starts[i] ?? 0) - (starts[j] ?? 0) >= 60_000) j++;
      most = Math.max(most, i - j + 1);
    }
    expect(most).toBeLessThanOrEqual(TIER_LIMITS[3]);
    expect(most).toBeGreaterThan(40);
  });

  it('an aborted wait gives its turn back: abandoned waits do not push the budget ahead', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const pacer = new LocalBurstPacer({ perSecond: 1, burst: 1 });
    await pacer.acquire();
    // Sixty requests queue, then give up (their lease ran out, say).
    const controller = new AbortController();
    const gaveUp = Promise.all(Array.from({ length: 60 }, () => pacer.acquire(controller.signal).catch(() => 'aborted')));
    await vi.advanceTimersByTimeAsync(100);
    controller.abort();
    expect(await gaveUp).toEqual(Array.from({ length: 60 }, () => 'aborted'));
    // The next request waits for its own turn (a second after the first), not behind sixty ghosts.
    const t0 = performance.now();
    const next = pacer.acquire();
    await vi.advanceTimersByTimeAsync(1_000);
    await next;
    expect(performance.now() - t0).toBeLessThanOrEqual(1_000);
  });
});

describe('the sandbox: posts per channel', () => {
  it('lets a post through that comes a little early after a delayed one, never two at once', () => {
    let now = 0;
    const limits = new RateLimits(() => now, 1, 1);
    expect(limits.admit('chat.postMessage', 'C1')).toBeUndefined();
    // Sent 1.05 s apart, the first delayed 700 ms in transit: they arrive 350 ms apart.
    now = 700;
    expect(limits.admit('chat.postMessage', 'C2')).toBeUndefined();
    now = 1_050;
    expect(limits.admit('chat.postMessage', 'C2')).toBeUndefined();
    // Two at once in one channel: the second is refused, for a second.
    now = 5_000;
    expect(limits.admit('chat.postMessage', 'C3')).toBeUndefined();
    expect(limits.admit('chat.postMessage', 'C3')).toBe(1);
    // Over time, never more than one a second (plus the slack for jitter).
    let admitted = 0;
    for (now = 10_000; now < 20_000; now += 100) if (limits.admit('chat.postMessage', 'C4') === undefined) admitted++;
    expect(admitted).toBeLessThanOrEqual(11);
    expect(admitted).toBeGreaterThanOrEqual(9);
  });
});
