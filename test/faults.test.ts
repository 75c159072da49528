import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';

// A Discord that fails: docs/guides/how-it-works.md, exactly once (retries, nonces).
describe('delivering through a failing Discord', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ env: { HERALD_DISCORD_TIMEOUT_MS: '1000', HERALD_MAX_ATTEMPTS: '4' } });
    await h.mapDestination('alerts', IDS.channels.alerts);
  });
  afterAll(() => h.close());
  beforeEach(() => h.sandbox.clearFaults());

  const count = (content: string) => h.sandbox.allMessages().filter((m) => m.content === content).length;

  it('creates the message, drops the response: the retry with the same nonce yields the same single message', async () => {
    const id = newRequestId();
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'drop_after_create', times: 2 });
    await h.bridge.post('/mcp/deliveries', post(id, `dropped ${id}`));
    const state = await h.waitForState(id, 'delivered');
    expect(count(`dropped ${id}`)).toBe(1);
    const [m] = h.sandbox.allMessages().filter((x) => x.content === `dropped ${id}`);
    expect(state['url']).toBe(`https://discord.com/channels/${IDS.guild}/${IDS.channels.alerts}/${m?.id}`);
  });

  it('retries 5xx answers and still sends once', async () => {
    const id = newRequestId();
    // One try an attempt (discord.js does not repeat a create; the engine does, in doubt): three of
    // the four attempts are answered 502.
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 502, times: 3 });
    await h.bridge.post('/mcp/deliveries', post(id, `5xx ${id}`));
    await h.waitForState(id, 'delivered', 60_000);
    expect(count(`5xx ${id}`)).toBe(1);
  });

  it('retries a request that times out after Discord created the message, without a second message', async () => {
    const id = newRequestId();
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'delay_after_create', ms: 1_500, times: 3 });
    await h.bridge.post('/mcp/deliveries', post(id, `timeout ${id}`));
    await h.waitForState(id, 'delivered');
    expect(count(`timeout ${id}`)).toBe(1);
  });

  // An injected 429 carries no Retry-After and no scope: neither a route nor a global limit.
  it('waits out a 429 (an injected one, without Retry-After), sends again and delivers once', async () => {
    const id = newRequestId();
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 429, code: 0, times: 1 });
    const before = h.sandbox.requests.length;
    await h.bridge.post('/mcp/deliveries', post(id, `429 ${id}`));
    await h.waitForState(id, 'delivered');
    expect(count(`429 ${id}`)).toBe(1);
    const posts = h.sandbox.requests.slice(before).filter((r) => r.method === 'POST' && r.path.endsWith('/messages'));
    expect(posts.map((r) => r.status)).toEqual([429, 200]);
  });

  it('fails with UPSTREAM_UNAVAILABLE when Discord refuses for good (403 Missing Access), with no retry', async () => {
    const id = newRequestId();
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 403, code: 50001, times: 1 });
    const before = h.sandbox.requests.length;
    await h.bridge.post('/mcp/deliveries', post(id, `forbidden ${id}`));
    const state = await h.waitForState(id, 'failed');
    expect(state['code']).toBe('UPSTREAM_UNAVAILABLE');
    expect(h.sandbox.requests.slice(before).filter((r) => r.method === 'POST')).toHaveLength(1);
  });

  it('gives up after HERALD_MAX_ATTEMPTS transient failures with UPSTREAM_UNAVAILABLE; a retry POST starts over', async () => {
    const id = newRequestId();
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 503, times: 1_000 });
    await h.bridge.post('/mcp/deliveries', post(id, `down ${id}`));
    const state = await h.waitForState(id, 'failed', 30_000);
    expect(state['code']).toBe('UPSTREAM_UNAVAILABLE');
    h.sandbox.clearFaults();
    const retry = await h.bridge.post('/mcp/deliveries', post(id, `down ${id}`));
    expect(retry.json).toMatchObject({ existing: true, state: { state: 'pending' } });
    await h.waitForState(id, 'delivered');
    expect(count(`down ${id}`)).toBe(1);
  });
});

describe('delivering under Discord rate limits', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ sandbox: { routeLimit: { limit: 3, windowMs: 500 }, globalLimit: { limit: 8, windowMs: 500 } } });
    await h.mapDestination('alerts', IDS.channels.alerts);
  });
  afterAll(() => h.close());

  it('delivers 15 posts under 3-per-500ms route and 8-per-500ms global limits, each created exactly once', async () => {
    const ids = Array.from({ length: 15 }, () => newRequestId());
    const before = h.sandbox.requests.length;
    await Promise.all(ids.map((id) => h.bridge.post('/mcp/deliveries', post(id, `limited ${id}`))));
    for (const id of ids) await h.waitForState(id, 'delivered', 30_000);
    for (const id of ids) expect(h.sandbox.allMessages().filter((m) => m.content === `limited ${id}`)).toHaveLength(1);
    // Exactly 15 creates were taken (a resend, hidden from the message count by the nonce, would
    // show here), none refused beyond a 429.
    const creates = h.sandbox.requests.slice(before).filter((r) => r.method === 'POST' && r.path.endsWith('/messages'));
    expect(creates.filter((r) => r.status === 200)).toHaveLength(15);
    expect(creates.every((r) => r.status === 200 || r.status === 429)).toBe(true);
  });
});
