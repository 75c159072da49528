import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The package's own export (built by `npm run build`, which `npm ci` runs as prepare).
import { createBridgeClient } from 'herald/client';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { freePort } from './support/ports.js';

describe('the generated bridge client (herald/client)', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ env: { HERALD_GATEWAY: 'off' } });
    await h.mapDestination();
  });
  afterAll(() => h.close());

  it('returns the protocol answers as typed results, never thrown strings', async () => {
    const bridge = createBridgeClient({ baseUrl: h.url, token: h.bridgeToken });
    const caps = await bridge.call('getCapabilities');
    expect(caps.ok && caps.data.destinations.map((d) => d.destination)).toEqual(['alerts', 'deals', 'digest', 'ops']);
    const id = newRequestId();
    const accepted = await bridge.call('createDelivery', { body: post(id, 'from the client') as never });
    expect(accepted).toMatchObject({ ok: true, status: 202, data: { existing: false, state: { state: 'pending' } } });
    expect(await bridge.call('getDelivery', { path: { request_id: newRequestId() } })).toEqual({ ok: false, status: 404, error: 'unknown request_id' });
    expect(await bridge.call('createDelivery', { body: { ...(post(id, '') as object), request_id: newRequestId() } as never })).toEqual({
      ok: false,
      status: 400,
      error: 'body.content must be 1..2000 characters',
    });
    expect(await bridge.call('getRegistration', { path: { user_id: IDS.user } })).toEqual({ ok: false, status: 404, error: 'not registered' });
    const wrong = createBridgeClient({ baseUrl: h.url, token: 'x'.repeat(43) });
    expect(await wrong.call('listRecipients')).toEqual({ ok: false, status: 401, error: 'unauthorized' });
  });

  it('retries 5xx and network errors with the same request, then reports the bridge unreachable', async () => {
    const seen: string[] = [];
    let failures = 2;
    const flaky: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      seen.push(await request.clone().text());
      if (failures-- > 0) return new Response('{"error":"internal error"}', { status: 503, headers: { 'content-type': 'application/json' } });
      return fetch(request);
    };
    const bridge = createBridgeClient({ baseUrl: h.url, token: h.bridgeToken, backoffMs: 1, fetch: flaky });
    const id = newRequestId();
    const res = await bridge.call('createDelivery', { body: post(id, 'retried') as never });
    expect(res).toMatchObject({ ok: true, status: 202, data: { existing: false } });
    expect(seen).toHaveLength(3);
    expect(new Set(seen).size).toBe(1);
    expect(JSON.parse(seen[0] ?? '{}')).toMatchObject({ request_id: id });

    const port = await freePort();
    const down = createBridgeClient({ baseUrl: `http://127.0.0.1:${port}`, token: h.bridgeToken, retries: 2, backoffMs: 1 });
    // Where it looked and what the network said, for the person who must start it or point elsewhere.
    expect(await down.call('getCapabilities')).toEqual({ ok: false, status: 0, error: 'bridge unreachable', url: `http://127.0.0.1:${port}`, cause: `connect ECONNREFUSED 127.0.0.1:${port}` });
  });

  it('with retryForMs, keeps retrying an unreachable bridge for that long, whatever the jitter', async () => {
    let tries = 0;
    const refused: typeof fetch = async () => {
      tries += 1;
      throw new TypeError('fetch failed');
    };
    const down = createBridgeClient({ baseUrl: 'http://127.0.0.1:9', token: h.bridgeToken, backoffMs: 1, retryForMs: 400, fetch: refused });
    const started = Date.now();
    expect(await down.call('getCapabilities')).toMatchObject({ ok: false, status: 0, error: 'bridge unreachable' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(tries).toBeGreaterThan(5);
  });

  it('with unreachableRetryForMs, rides out only a bridge that was answering: one never reached, or down last time, is reported at once', async () => {
    let up = false;
    const bridgeFetch: typeof fetch = async (input, init) => {
      if (!up) throw new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }) });
      return fetch(new Request(input, init));
    };
    const bridge = createBridgeClient({ baseUrl: h.url, token: h.bridgeToken, backoffMs: 1, retryForMs: 1_500, unreachableRetryForMs: 100, fetch: bridgeFetch });
    const timed = async <T>(call: () => Promise<T>): Promise<{ result: T; ms: number }> => {
      const started = Date.now();
      const result = await call();
      return { result, ms: Date.now() - started };
    };
    // Never reached: about unreachableRetryForMs.
    const first = await timed(() => bridge.call('getCapabilities'));
    expect(first.result).toMatchObject({ ok: false, status: 0, cause: 'connect ECONNREFUSED 127.0.0.1:9' });
    expect(first.ms).toBeLessThan(1_000);
    // Answering, then gone: ridden out for retryForMs.
    up = true;
    expect((await bridge.call('getCapabilities')).ok).toBe(true);
    up = false;
    const gone = await timed(() => bridge.call('getCapabilities'));
    expect(gone.result).toMatchObject({ ok: false, status: 0 });
    expect(gone.ms).toBeGreaterThanOrEqual(1_500);
    // Found down last time: reported at once again.
    expect((await timed(() => bridge.call('getCapabilities'))).ms).toBeLessThan(1_000);
  });
});
