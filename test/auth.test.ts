import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, contractApi } from './support/client.js';
import { newToken, startTestHerald, type TestHerald } from './support/herald.js';

// docs/protocol.md §1: mounting, order of checks, errors.
describe('protocol §1: auth, routing and errors', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
  });
  afterAll(() => h.close());

  it('answers 401 unauthorized without a token, with a wrong token, or a malformed header', async () => {
    const headers = [undefined, `Bearer ${newToken()}`, `bearer ${h.bridgeToken}`, `Bearer  ${h.bridgeToken}`, 'Bearer ', h.bridgeToken, `Basic ${h.bridgeToken}`];
    for (const authorization of headers) {
      const res = await call(h.url, 'GET', '/mcp/capabilities', authorization === undefined ? {} : { headers: { authorization } });
      expect(res.status, String(authorization)).toBe(401);
      expect(res.text).toBe('{"error":"unauthorized"}');
    }
  });

  it('authenticates before routing: an unknown path without a token is 401, with one 404', async () => {
    expect((await call(h.url, 'GET', '/mcp/nope')).text).toBe('{"error":"unauthorized"}');
    const res = await h.bridge.get('/mcp/nope');
    expect(res.status).toBe(404);
    expect(res.text).toBe('{"error":"not found"}');
  });

  it('matches paths exactly: a trailing slash is 404', async () => {
    for (const path of ['/mcp/capabilities/', '/mcp/deliveries/', '/mcp/recipients/']) {
      const res = await h.bridge.get(path);
      expect(res.status, path).toBe(404);
      expect(res.text).toBe('{"error":"not found"}');
    }
  });

  it('answers 405 for a known path with another method, HEAD/OPTIONS/PUT included', async () => {
    for (const [method, path] of [
      ['POST', '/mcp/capabilities'],
      ['PUT', '/mcp/capabilities'],
      ['OPTIONS', '/mcp/capabilities'],
      ['DELETE', '/mcp/deliveries'],
      ['GET', '/mcp/deliveries'],
      ['PUT', '/mcp/deliveries'],
      ['POST', '/mcp/recipients'],
      ['GET', '/mcp/pair/redeem'],
      ['POST', `/mcp/deliveries/${'a'.repeat(64)}`],
    ] as const) {
      const res = await h.bridge.call(method, path);
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.text).toBe('{"error":"method not allowed"}');
    }
    const head = await h.bridge.call('HEAD', '/mcp/capabilities');
    expect(head.status).toBe(405);
  });

  it('answers 413 for a body over 65,536 bytes before parsing it, and 400 for one that is not JSON', async () => {
    const big = await h.bridge.call('POST', '/mcp/deliveries', { raw: 'x'.repeat(65_537), headers: { 'content-type': 'application/json' } });
    expect(big.status).toBe(413);
    expect(big.text).toBe('{"error":"request body too large"}');
    // Exactly at the limit is read (and here fails as not JSON).
    const edge = await h.bridge.call('POST', '/mcp/deliveries', { raw: 'x'.repeat(65_536) });
    expect(edge.status).toBe(400);
    expect(edge.text).toBe('{"error":"request body must be valid JSON"}');
    // The limit is in UTF-8 bytes: 21,846 three-byte characters are 65,538 bytes.
    const wide = await h.bridge.call('POST', '/mcp/deliveries', { raw: JSON.stringify({ x: '€'.repeat(21_846) }) });
    expect(wide.status).toBe(413);
    for (const raw of ['', '{', 'not json', '{"a":1,}']) {
      const res = await h.bridge.call('POST', '/mcp/deliveries', { raw });
      expect(res.status, JSON.stringify(raw)).toBe(400);
      expect(res.text).toBe('{"error":"request body must be valid JSON"}');
    }
  });

  it('serves the bridge token only on /mcp/ and the admin token only on /admin/', async () => {
    expect((await call(h.url, 'GET', '/admin/destinations', { token: h.bridgeToken })).status).toBe(401);
    expect((await call(h.url, 'GET', '/mcp/capabilities', { token: h.adminToken })).status).toBe(401);
    expect((await h.admin.get('/admin/destinations')).status).toBe(200);
  });

  it('answers health probes without a token', async () => {
    expect((await call(h.url, 'GET', '/healthz')).json).toEqual({ status: 'ok' });
    expect((await call(h.url, 'GET', '/readyz')).json).toEqual({ status: 'ok', checks: { database: 'ok', dispatcher: 'ok', listen: 'ok', gateway: 'ok' }, singletons: { 'discord:gateway': 'held' } });
  });
});

describe('authentication comes before the body, on every operation', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
  });
  afterAll(() => h.close());

  /** A concrete path for an operation's template. */
  const concrete = (path: string): string =>
    path.replace(/\{[^}]*(request_id|sha256)\}/, 'a'.repeat(64)).replace('{guild_id}', '234567890123456789').replace('{destination}', 'alerts').replace(/\{[^}]+\}/g, '0f8fad5b-d9cb-469f-a165-70867728950e');

  it('a body that is not JSON, or too large, from a caller the operation does not take is 401 (or 429), never 400 or 413', async () => {
    const api = await contractApi();
    const documentSecurity = (api.definition.security ?? []) as Record<string, unknown>[];
    const withBody = api.getOperations().filter((op) => op.requestBody !== undefined);
    expect(withBody.length).toBeGreaterThanOrEqual(8);
    let checked = 0;
    for (const op of withBody) {
      const schemes = ((op.security ?? documentSecurity) as Record<string, unknown>[]).flatMap((r) => Object.keys(r));
      // Nobody, a stranger, and each token the operation does not take (the bridge token on an admin-only write).
      const callers: [string, string | undefined][] = [
        ['no token', undefined],
        ['a wrong token', newToken()],
        ...(schemes.includes('bridgeToken') ? [] : [['the bridge token', h.bridgeToken] as [string, string]]),
        ...(schemes.includes('adminToken') ? [] : [['the admin token', h.adminToken] as [string, string]]),
      ];
      for (const [who, token] of callers) {
        const bodies: [string, string][] = [
          ['not JSON', '{"channel_id": oops'],
          ['over 65,536 bytes', JSON.stringify({ x: 'y'.repeat(70_000) })],
        ];
        for (const [what, raw] of bodies) {
          const res = await call(h.url, op.method.toUpperCase(), concrete(op.path), { token, raw, headers: { 'content-type': 'application/json' } });
          expect([res.status, res.json], `${op.operationId} with ${who}, body ${what}`).toEqual(
            res.status === 429 ? [429, { error: 'too many failed attempts' }] : [401, { error: 'unauthorized' }],
          );
          checked += 1;
        }
      }
    }
    expect(checked).toBeGreaterThan(30);
  });

  it('PUT /admin/destinations/… with the bridge token and invalid JSON is 401; with the admin token it is 400', async () => {
    const path = '/admin/destinations/234567890123456789/alerts';
    const raw = '{"channel_id": oops';
    expect((await call(h.url, 'PUT', path, { token: h.bridgeToken, raw })).text).toBe('{"error":"unauthorized"}');
    const admin = await call(h.url, 'PUT', path, { token: h.adminToken, raw });
    expect([admin.status, admin.text]).toEqual([400, '{"error":"request body must be valid JSON"}']);
  });

  it('routes outside the JSON API (the archive\'s event stream and files) authenticate first too', async () => {
    for (const path of ['/admin/archive/events', `/admin/archive/files/${'a'.repeat(64)}`]) {
      const res = await fetch(`${h.url}${path}`, { method: 'GET', headers: { authorization: `Bearer ${h.bridgeToken}x` } });
      const text = await res.text();
      // The test above spent this address's failed attempts: the throttle's 429 is an auth refusal too.
      expect([path, res.status, text]).toEqual([path, res.status === 429 ? 429 : 401, res.status === 429 ? '{"error":"too many failed attempts"}' : '{"error":"unauthorized"}']);
    }
  });
});

describe('protocol §1: failed-auth throttling', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
  });
  afterAll(() => h.close());

  it('refuses failed attempts past 10 a minute with 429 and Retry-After, but never the right token', async () => {
    const wrong = newToken();
    for (let i = 1; i <= 10; i++) {
      expect((await call(h.url, 'GET', '/mcp/capabilities', { token: wrong })).status, `failure ${i}`).toBe(401);
    }
    const limited = await call(h.url, 'GET', '/mcp/capabilities', { token: wrong });
    expect(limited.status).toBe(429);
    expect(limited.text).toBe('{"error":"too many failed attempts"}');
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // Unauthenticated requests to unknown paths are failures too.
    expect((await call(h.url, 'GET', '/mcp/nope')).status).toBe(429);
    // The real caller is never locked out.
    const ok = await h.bridge.get('/mcp/capabilities');
    expect(ok.status).toBe(200);
  });
});

describe('protocol §1: bridge not configured', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ env: { MCP_BRIDGE_TOKEN: '', HERALD_ADMIN_TOKEN: '' } });
  });
  afterAll(() => h.close());

  it('answers 503 before anything else when MCP_BRIDGE_TOKEN is unset', async () => {
    for (const [method, path] of [
      ['GET', '/mcp/capabilities'],
      ['GET', '/mcp/nope'],
      ['PUT', '/mcp/capabilities'],
      ['POST', '/mcp/deliveries'],
    ] as const) {
      const res = await call(h.url, method, path, { token: newToken() });
      expect(res.status).toBe(503);
      expect(res.text).toBe('{"error":"bridge not configured"}');
    }
    const admin = await call(h.url, 'GET', '/admin/destinations', { token: newToken() });
    expect(admin.status).toBe(503);
    expect(admin.text).toBe('{"error":"admin not configured"}');
  });
});
