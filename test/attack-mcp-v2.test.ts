import { mkdtemp, rm } from 'node:fs/promises';
import { request as httpRequest, type Server as HttpServer } from 'node:http';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { startHttp } from '../src/mcp/run.js';
import { SANDBOX_MEMBER_IDS } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, newRequestId, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { startRoundRobinProxy, type RoundRobinProxy } from './support/http-proxy.js';
import { mcpOverHttp, toolText, type ToolResult } from './support/mcp.js';
import { REPLAY_SAMPLES, type ReplaySeen } from './support/mcp-calls.js';
import { MODERN_REVISION, modernOverHttp } from './support/mcp-v2.js';
import { localIssuer, type LocalIssuer } from './support/oauth.js';
import { waitFor } from './support/wait.js';

/**
 * Issue 39's new MCP surface attacked as a hostile agent, another channel member and the network:
 * raw HTTP against `herald mcp --http` (headers, revisions, batches, bodies, disconnects, Origin,
 * Host, paths), auth on every method, request_id replays across principals and replicas, re-issues
 * with other arguments under the same key, and what answers and logs give away. An attack that holds
 * is a passing test; each hole it found is a test of the fix ("Was a hole: ...").
 */

type Result = ToolResult & { structuredContent?: Record<string, unknown> };

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP exchange with full control of the method, the request-target and every header (Host included). */
function raw(url: string, o: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<RawAnswer> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, method: o.method ?? 'POST', path: o.path ?? u.pathname, headers: { connection: 'close', ...o.headers }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** A 2026-07-28 request as the v2 client sends it: the revision in `_meta` and in the headers. */
function modern(method: string, params: Record<string, unknown> = {}, id: number | string = 1): { headers: Record<string, string>; body: string } {
  const name = typeof params['name'] === 'string' ? { 'mcp-name': params['name'] } : {};
  return {
    headers: { ...JSON_HEADERS, 'mcp-protocol-version': MODERN_REVISION, 'mcp-method': method, ...name },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method,
      params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN_REVISION, 'io.modelcontextprotocol/clientInfo': { name: 'attacker', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {} } },
    }),
  };
}

/** A 2025 request (no envelope; the legacy stateless leg). */
function legacy(method: string, params: Record<string, unknown> = {}, id: number | string | undefined = 1): { headers: Record<string, string>; body: string } {
  return { headers: { ...JSON_HEADERS, 'mcp-protocol-version': '2025-11-25' }, body: JSON.stringify({ jsonrpc: '2.0', ...(id === undefined ? {} : { id }), method, params }) };
}

/** What no answer may carry: a stack frame, a source path, a token. */
function leaks(text: string, secrets: readonly string[]): string[] {
  const found: string[] = [];
  if (/\n\s+at [^\n]+:\d+:\d+/.test(text)) found.push('a stack trace');
  if (/\/src\/[\w/.-]+\.ts|node_modules\//.test(text)) found.push('a source path');
  for (const s of secrets) if (s.length > 0 && text.includes(s)) found.push(`a secret (${s.slice(0, 6)}…)`);
  return found;
}

describe('attacking herald mcp --http (issue 39)', { timeout: 240_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let issuer: LocalIssuer;
  let proxy: RoundRobinProxy;
  const servers: HttpServer[] = [];
  /** Replica A's and B's /mcp (one Herald, one HERALD_MCP_STATE file). */
  const urls: string[] = [];
  const token = newToken();
  /** Everything both replicas logged. */
  let logged = '';
  const closers: (() => Promise<void>)[] = [];
  const posted = (content: string): number => h.sandbox.allMessages().filter((m) => m.content.startsWith(content)).length;

  beforeAll(async () => {
    h = await startTestHerald({ env: { HERALD_TRUSTED_BOT_IDS: SANDBOX_MEMBER_IDS.otherBot, HERALD_COMMAND_EXECUTION_ENABLED: 'true', HERALD_DISCORD_CHAT_GUILD: IDS.guild } });
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
    await h.mapDestination();
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    issuer = await localIssuer();
    dir = await mkdtemp(path.join(tmpdir(), 'herald-attack-mcp-'));
    const sink = new PassThrough();
    sink.on('data', (c: Buffer) => (logged += c.toString('utf8')));
    for (let i = 0; i < 2; i++) {
      const config = loadConfig({
        HERALD_URL: h.url,
        MCP_BRIDGE_TOKEN: h.bridgeToken,
        HERALD_MCP_STATE: path.join(dir, 'state.json'),
        HERALD_MCP_PORT: '0',
        HERALD_MCP_TOKEN: token,
        HERALD_MCP_WAIT_MS: '15000',
        HERALD_MCP_OAUTH_ISSUER: issuer.url,
        // Both replicas name one resource (the proxy's), as a deployment behind a balancer does.
        HERALD_MCP_RESOURCE: 'http://mcp.test/mcp',
      });
      const started = await startHttp(config, h.bridgeToken, token, createLogger('debug', sink));
      servers.push(started.server);
      urls.push(started.url);
    }
    proxy = await startRoundRobinProxy(urls.map((u) => Number(new URL(u).port)));
  }, 240_000);
  afterAll(async () => {
    for (const c of closers) await c();
    await proxy?.close();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
    await issuer?.close();
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const oauth = (client: string, scope = 'read write', aud = 'http://mcp.test/mcp'): Promise<string> => issuer.sign({ client_id: client, sub: client, scope, aud });
  const url = (): string => urls[0] ?? '';
  const auth = (t: string = token): Record<string, string> => ({ authorization: `Bearer ${t}` });

  describe('authentication on every method and path', () => {
    it('no token, a wrong token, a forged one and one for another audience: refused (401, or 429 once throttled) on every method, path and revision, with nothing done', async () => {
      const forged = await issuer.sign({ client_id: 'mallory', scope: 'read write admin', aud: 'http://mcp.test/mcp' }, { key: issuer.other });
      const otherAudience = await oauth('mallory', 'read write admin', 'http://elsewhere.test/mcp');
      const content = `attack unauthenticated ${newRequestId().slice(0, 8)}`;
      const post = { name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content } };
      const exchanges: { label: string; method: string; path: string; headers: Record<string, string>; body?: string }[] = [
        { label: 'modern server/discover', method: 'POST', path: '/mcp', ...modern('server/discover') },
        { label: 'modern tools/list', method: 'POST', path: '/mcp', ...modern('tools/list') },
        { label: 'modern tools/call', method: 'POST', path: '/mcp', ...modern('tools/call', post) },
        { label: 'modern notification', method: 'POST', path: '/mcp', ...modern('notifications/cancelled', { requestId: 1 }) },
        { label: 'legacy initialize', method: 'POST', path: '/mcp', ...legacy('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } }) },
        { label: 'legacy tools/call', method: 'POST', path: '/mcp', ...legacy('tools/call', post) },
        { label: 'legacy notification', method: 'POST', path: '/mcp', ...legacy('notifications/initialized', {}, undefined) },
        { label: 'batch', method: 'POST', path: '/mcp', headers: JSON_HEADERS, body: JSON.stringify([JSON.parse(legacy('tools/call', post).body)]) },
        { label: 'GET /mcp', method: 'GET', path: '/mcp', headers: { accept: 'text/event-stream' } },
        { label: 'DELETE /mcp', method: 'DELETE', path: '/mcp', headers: {} },
        { label: 'OPTIONS /mcp', method: 'OPTIONS', path: '/mcp', headers: {} },
        { label: 'GET /sse', method: 'GET', path: '/sse', headers: { accept: 'text/event-stream' } },
        { label: 'the token in the query string', method: 'POST', path: `/mcp?access_token=${encodeURIComponent(token)}`, ...legacy('tools/call', post) },
        { label: 'POST /messages', method: 'POST', path: '/messages?sessionId=00000000-0000-0000-0000-000000000000', headers: JSON_HEADERS, body: legacy('tools/call', post).body },
      ];
      const tokens: [string, Record<string, string>][] = [
        ['none', {}],
        ['wrong', auth(newToken())],
        ['not bearer', { authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` }],
        ['bearer, lowercase scheme with the right token', { authorization: `bearer ${token}x` }],
        ['forged', auth(forged)],
        ['another audience', auth(otherAudience)],
      ];
      for (const e of exchanges) {
        for (const [which, headers] of tokens) {
          const r = await raw(url(), { method: e.method, path: e.path, headers: { ...e.headers, ...headers }, ...(e.body === undefined ? {} : { body: e.body }) });
          expect([401, 429], `${e.label}, ${which} token: ${r.status} ${r.body}`).toContain(r.status);
          expect(leaks(r.body, [token, forged, otherAudience]), e.label).toEqual([]);
          if (r.status === 401) expect(String(r.headers['www-authenticate']), e.label).toMatch(/^Bearer resource_metadata="/);
        }
      }
      expect(posted(content)).toBe(0);
    });

    // Was a hole: the failure throttle (src/mcp/run.ts, handle) counted a request with no
    // Authorization header as a failed guess and answered 429 with no WWW-Authenticate. Behind a
    // proxy every client shares one address: anyone's ten wrong tokens a minute kept every new client
    // from the 401 challenge whose resource_metadata starts its OAuth discovery.
    it("someone else's wrong tokens do not keep a client without a token from the 401 challenge (OAuth discovery)", async () => {
      for (let i = 0; i < 12; i++) await raw(url(), { ...modern('tools/list'), headers: { ...modern('tools/list').headers, ...auth(newToken()) } });
      const r = await raw(url(), modern('server/discover'));
      expect(String(r.headers['www-authenticate']), `${r.status} ${r.body}`).toMatch(/^Bearer resource_metadata="/);
    });

    it('the throttle is per address and never locks out the valid token', async () => {
      // The walk above put this address over its limit; the right token still gets in.
      const r = await raw(url(), { ...modern('tools/list'), headers: { ...modern('tools/list').headers, ...auth() } });
      expect(r.status, r.body).toBe(200);
    });
  });

  describe('raw 2026-07-28 and 2025 requests', () => {
    const call = (o: { headers: Record<string, string>; body: string }, t: string = token): Promise<RawAnswer> => raw(url(), { headers: { ...o.headers, ...auth(t) }, body: o.body });

    it('a well-formed 2026-07-28 tools/list and server/discover are answered', async () => {
      for (const m of ['server/discover', 'tools/list']) {
        const r = await call(modern(m));
        expect(r.status, `${m}: ${r.body}`).toBe(200);
        expect(r.body).toContain('"result"');
      }
    });

    it('Mcp-Method that names another method than the body, or Mcp-Name another tool, is refused and nothing is done', async () => {
      const content = `attack header mismatch ${newRequestId().slice(0, 8)}`;
      const args = { name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content } };
      const base = modern('tools/call', args);
      const variants: [string, Record<string, string>][] = [
        ['Mcp-Method tools/list', { ...base.headers, 'mcp-method': 'tools/list' }],
        ['Mcp-Name get_delivery', { ...base.headers, 'mcp-name': 'get_delivery' }],
        ['no Mcp-Method', Object.fromEntries(Object.entries(base.headers).filter(([k]) => k !== 'mcp-method'))],
        ['no Mcp-Name', Object.fromEntries(Object.entries(base.headers).filter(([k]) => k !== 'mcp-name'))],
        ['no MCP-Protocol-Version', Object.fromEntries(Object.entries(base.headers).filter(([k]) => k !== 'mcp-protocol-version'))],
        ['MCP-Protocol-Version 2025-11-25', { ...base.headers, 'mcp-protocol-version': '2025-11-25' }],
      ];
      for (const [label, headers] of variants) {
        const r = await call({ headers, body: base.body });
        expect(r.status, `${label}: ${r.status} ${r.body}`).toBeGreaterThanOrEqual(400);
        expect(r.status, label).toBeLessThan(500);
        expect(r.body, label).toContain('"error"');
      }
      expect(posted(content)).toBe(0);
    });

    it('a revision Herald does not speak, in the envelope or the header, is refused with the revisions it does', async () => {
      const m = modern('tools/list');
      const body = m.body.replaceAll(MODERN_REVISION, '2099-01-01');
      const r = await call({ headers: { ...m.headers, 'mcp-protocol-version': '2099-01-01' }, body });
      expect(r.status, r.body).toBe(400);
      expect(r.body).toContain(MODERN_REVISION);
      // A 2025 request naming an unknown revision in its header only.
      const l = legacy('tools/list');
      const r2 = await call({ headers: { ...l.headers, 'mcp-protocol-version': '1999-01-01' }, body: l.body });
      expect(r2.status, r2.body).toBe(400);
    });

    it('a 2026-07-28 header without the `_meta` envelope is refused, not served as 2025', async () => {
      const content = `attack no meta ${newRequestId().slice(0, 8)}`;
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content } } });
      const r = await call({ headers: modern('tools/call', { name: 'post_message' }).headers, body });
      expect(r.status, r.body).toBe(400);
      expect(posted(content)).toBe(0);
    });

    it('a batch array of writes is refused whole, or each done once: never twice', async () => {
      const content = `attack batch ${newRequestId().slice(0, 8)}`;
      const requestId = newRequestId();
      const one = (id: number): unknown => JSON.parse(legacy('tools/call', { name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content, request_id: requestId } }, id).body);
      const r = await raw(url(), { headers: { ...JSON_HEADERS, ...auth() }, body: JSON.stringify([one(1), one(2)]) });
      expect(r.status, r.body).toBeLessThan(500);
      expect(posted(content)).toBeLessThanOrEqual(1);
      // A modern batch (envelope claims inside an array).
      const m = JSON.parse(modern('tools/call', { name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content: `${content} m` } }).body) as unknown;
      const r2 = await raw(url(), { headers: { ...modern('tools/call').headers, ...auth() }, body: JSON.stringify([m, m]) });
      expect(r2.status, r2.body).toBeGreaterThanOrEqual(400);
      expect(posted(`${content} m`)).toBe(0);
    });

    it('invalid JSON, a non-JSON-RPC body, a wrong content type and an empty body: a 4xx, never a 5xx or a stack', async () => {
      const bodies: [string, Record<string, string>, string][] = [
        ['invalid JSON', JSON_HEADERS, '{"jsonrpc":'],
        ['a number', JSON_HEADERS, '42'],
        ['null', JSON_HEADERS, 'null'],
        ['an empty array', JSON_HEADERS, '[]'],
        ['an object without jsonrpc', JSON_HEADERS, '{"method":"tools/list","id":1}'],
        ['text/plain', { ...JSON_HEADERS, 'content-type': 'text/plain' }, legacy('tools/list').body],
        ['form', { ...JSON_HEADERS, 'content-type': 'application/x-www-form-urlencoded' }, 'a=b'],
        ['no content type', { accept: JSON_HEADERS.accept }, legacy('tools/list').body],
        ['no Accept, modern', Object.fromEntries(Object.entries(modern('tools/list').headers).filter(([k]) => k !== 'accept')), modern('tools/list').body],
        ['Accept text/html, legacy', { ...JSON_HEADERS, accept: 'text/html' }, legacy('tools/list').body],
        ['empty', JSON_HEADERS, ''],
        ['tools/call with a non-string name', JSON_HEADERS, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: { toString: 1 }, arguments: [] } })],
        ['tools/call with array arguments', JSON_HEADERS, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_inbox', arguments: [1, 2] } })],
        ['an unknown method', JSON_HEADERS, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'admin/shutdown', params: {} })],
        ['an object as JSON-RPC id', JSON_HEADERS, JSON.stringify({ jsonrpc: '2.0', id: { a: 1 }, method: 'tools/list', params: {} })],
        ['a null JSON-RPC id', JSON_HEADERS, JSON.stringify({ jsonrpc: '2.0', id: null, method: 'tools/list', params: {} })],
        ['a 100 kB JSON-RPC id', JSON_HEADERS, JSON.stringify({ jsonrpc: '2.0', id: 'i'.repeat(100_000), method: 'tools/call', params: { name: 'nope' } })],
        ['modern initialize', modern('initialize').headers, modern('initialize', { protocolVersion: MODERN_REVISION, capabilities: {}, clientInfo: { name: 'x', version: '1' } }).body],
        ['a posted response', JSON_HEADERS, JSON.stringify({ jsonrpc: '2.0', id: 1, result: {} })],
      ];
      for (const [label, headers, body] of bodies) {
        const r = await raw(url(), { headers: { ...headers, ...auth() }, body });
        expect(r.status, `${label}: ${r.status} ${r.body.slice(0, 300)}`).toBeLessThan(500);
        // A refusal: an HTTP error, a JSON-RPC error, a tool error, or nothing (a posted response is accepted and dropped).
        const refused = r.status >= 400 || r.body === '' || /"error"|"isError":true/.test(r.body);
        expect(refused, `${label}: ${r.status} ${r.body.slice(0, 300)}`).toBe(true);
        expect(leaks(r.body, [token, h.bridgeToken]), label).toEqual([]);
      }
    });

    it('subscriptions/listen asking for nothing is acknowledged and its stream ends: no stream held open for nothing', async () => {
      const r = await call(modern('subscriptions/listen', { notifications: {} }));
      expect(r.status, r.body.slice(0, 300)).toBe(200);
      expect(r.body).toContain('notifications/subscriptions/acknowledged');
      expect(r.body).toContain('"resultType":"complete"');
    });

    it('a body over the limit is refused (413) and the server keeps serving', async () => {
      const huge = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content: 'x'.repeat(6 * 1024 * 1024) } } });
      const r = await raw(url(), { headers: { ...JSON_HEADERS, ...auth() }, body: huge }).catch((err: unknown) => ({ status: -1, headers: {}, body: String(err) }));
      // Refused: a 413, or the connection dropped before the whole body was read.
      expect([413, -1], r.body.slice(0, 200)).toContain(r.status);
      const after = await raw(url(), { ...modern('tools/list'), headers: { ...modern('tools/list').headers, ...auth() } });
      expect(after.status).toBe(200);
    });

    it('hostile arguments (deep nesting, huge strings, prototype keys, control characters) answer a tool error naming the problem, never a 5xx', async () => {
      // Nesting deep enough to overflow a recursive walk, spliced in as text (JSON.stringify itself would overflow).
      const DEEP = '__deep__';
      const cases: [string, Record<string, unknown>][] = [
        ['deep nesting', { guild_id: IDS.guild, destination: 'alerts', content: DEEP }],
        ['a 1 MB content', { guild_id: IDS.guild, destination: 'alerts', content: 'y'.repeat(1024 * 1024) }],
        ['__proto__', JSON.parse('{"guild_id":"1","destination":"alerts","content":"p","__proto__":{"admin":true}}') as Record<string, unknown>],
        ['constructor', { guild_id: IDS.guild, destination: 'alerts', content: 'c', constructor: { prototype: { polluted: true } } }],
        ['a lone surrogate', { guild_id: IDS.guild, destination: 'alerts', content: 'bad \ud800 text' }],
        ['a NUL', { guild_id: IDS.guild, destination: 'alerts', content: 'nul \u0000 text' }],
        ['a request_id not hex', { guild_id: IDS.guild, destination: 'alerts', content: 'r', request_id: '../../etc/passwd' }],
      ];
      for (const revision of ['modern', 'legacy'] as const) {
        for (const [label, args] of cases) {
          const o = revision === 'modern' ? modern('tools/call', { name: 'post_message', arguments: args }) : legacy('tools/call', { name: 'post_message', arguments: args });
          const r = await call({ headers: o.headers, body: o.body.replace(`"${DEEP}"`, `${'['.repeat(100_000)}"x"${']'.repeat(100_000)}`) });
          expect(r.status, `${revision} ${label}: ${r.status} ${r.body.slice(0, 300)}`).toBeLessThan(500);
          expect(r.body, `${revision} ${label}`).toMatch(/"isError":true|"error"/);
          expect(leaks(r.body, [token, h.bridgeToken]), `${revision} ${label}`).toEqual([]);
        }
      }
      expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
      expect(({} as Record<string, unknown>)['admin']).toBeUndefined();
    });
  });

  describe('the network: Origin, Host, paths, methods', () => {
    it('a browser origin not allowed, and the opaque `null` origin, are refused (403) even with the right token; a loopback one is allowed', async () => {
      for (const origin of ['http://evil.example', 'null', 'https://localhost.evil.example', 'http://127.0.0.1.nip.io', 'file://']) {
        const r = await raw(url(), { ...modern('tools/list'), headers: { ...modern('tools/list').headers, ...auth(), origin } });
        expect(r.status, `${origin}: ${r.body}`).toBe(403);
      }
      const ok = await raw(url(), { ...modern('tools/list'), headers: { ...modern('tools/list').headers, ...auth(), origin: 'http://localhost:6274' } });
      expect(ok.status).toBe(200);
    });

    it('no CORS grant: a preflight gets no Access-Control-Allow-Origin for a foreign origin', async () => {
      const r = await raw(url(), { method: 'OPTIONS', headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization' } });
      expect(r.headers['access-control-allow-origin']).toBeUndefined();
      expect(r.status).toBe(403);
    });

    it('a hostile Host header changes nothing: the answer is the same, and no URL is built from it', async () => {
      for (const host of ['evil.example', 'localhost:1@evil.example', '[::1', '', 'a'.repeat(2000)]) {
        const r = await raw(url(), { ...modern('tools/list'), headers: { ...modern('tools/list').headers, ...auth(), host } });
        expect(r.status, `${host}: ${r.body.slice(0, 200)}`).toBeLessThan(500);
        expect(r.body).not.toContain('evil.example');
      }
    });

    it('path tricks reach nothing but /mcp, /sse and /messages, and none answers a 5xx', async () => {
      const answers: Record<string, number> = {};
      for (const p of ['/MCP', '/mcp/', '/mcp/../mcp', '/%6dcp', '/mcp%00', '//evil.example/mcp', 'http://evil.example/mcp', '/sse/../mcp', '/.well-known/../mcp', '*', '/mcp?x=%ZZ', '/mcp?access_token=x', '/messages?sessionId=../../mcp']) {
        const o = modern('tools/list');
        const r = await raw(url(), { path: p, headers: { ...o.headers, ...auth() }, body: o.body }).catch((err: unknown) => ({ status: -1, headers: {}, body: String(err) }));
        answers[p] = r.status;
      }
      for (const [p, status] of Object.entries(answers)) expect(status, `${p}: ${JSON.stringify(answers)}`).toBeLessThan(500);
    });

    // Was a hole: startHttp's handle (src/mcp/run.ts) parsed req.url with `new URL` before any check:
    // a target it refused threw, and any unauthenticated client got a 500 and an error-level log line.
    it('a request-target the URL parser refuses (`//[`) is a 400, not a 500 and an error log', async () => {
      const o = modern('tools/list');
      const r = await raw(url(), { path: '//[', headers: { ...o.headers, ...auth() }, body: o.body });
      expect(r.status, r.body).toBe(400);
    });

    it('GET, DELETE and other methods on /mcp with the right token: answered without a 5xx, no session to end', async () => {
      for (const method of ['GET', 'DELETE', 'PUT', 'PATCH', 'HEAD', 'OPTIONS']) {
        const r = await raw(url(), { method, headers: { ...auth(), accept: 'application/json, text/event-stream', 'mcp-session-id': 'anything' } });
        expect(r.status, `${method}: ${r.body}`).toBeLessThan(500);
        expect(r.status, `${method}: ${r.body}`).not.toBe(200);
      }
    });

    it('an unauthenticated client that sends headers and never its body is answered at once, not held', async () => {
      const u = new URL(url());
      const socket = tcpConnect(Number(u.port), u.hostname);
      let seen = '';
      socket.on('data', (c: Buffer) => (seen += c.toString('utf8')));
      socket.write(`POST /mcp HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{"jsonrpc"`);
      try {
        await waitFor(() => /^HTTP\/1\.1 (401|429)/.test(seen) || undefined, 'an answer before the body', 10_000);
      } finally {
        socket.destroy();
      }
    });
  });

  describe('a client that goes away mid-call', () => {
    it('a keyed post whose client disconnects before the answer is done once; the re-issue replays it; no socket is left behind', async () => {
      const requestId = newRequestId();
      const content = `attack disconnect ${requestId.slice(0, 8)}`;
      const o = modern('tools/call', { name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content, request_id: requestId } });
      const u = new URL(url());
      for (let i = 0; i < 5; i++) {
        // Sent whole, then the connection dropped before any answer.
        await new Promise<void>((resolve) => {
          const req = httpRequest({ host: u.hostname, port: u.port, method: 'POST', path: '/mcp', headers: { ...o.headers, ...auth() }, agent: false });
          req.on('error', () => resolve());
          req.end(o.body, () => setImmediate(() => {
            req.destroy();
            resolve();
          }));
        });
      }
      await waitFor(() => posted(content) === 1 || undefined, 'the post, once', 20_000);
      const again = await raw(url(), { headers: { ...o.headers, ...auth() }, body: o.body });
      expect(again.status, again.body).toBe(200);
      expect(again.body).toContain('"replayed":true');
      expect(posted(content)).toBe(1);
      const server = servers[0] as HttpServer;
      await waitFor(
        () =>
          new Promise<boolean | undefined>((resolve) => {
            server.getConnections((_, n) => resolve(n === 0 || undefined));
          }),
        'no connection left open',
        10_000,
      );
    });
  });

  describe('a client that opens and walks away', () => {
    /** This process's open TCP sockets (the MCP servers, Herald and the clients all live here). */
    const sockets = (): number => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

    // Was a hole: the tools/call handler (src/mcp/server.ts) never handed the exchange's abort signal
    // to the tool, so a long wait (wait_for_messages, wait_for_handoff) whose client went away kept its
    // long poll on Herald open for its whole timeout: N callers that disconnect held N polls.
    it('a wait_for_messages whose client disconnects stops waiting on Herald at once (no orphaned long poll)', async () => {
      const baseline = await waitFor(async () => {
        const before = sockets();
        await new Promise((r) => setTimeout(r, 300));
        return sockets() === before ? before : undefined;
      }, 'a quiet baseline');
      const o = modern('tools/call', { name: 'wait_for_messages', arguments: { after: '999999999', timeout_ms: 25_000 } });
      const u = new URL(url());
      const n = 6;
      const reqs = Array.from({ length: n }, () => {
        const req = httpRequest({ host: u.hostname, port: u.port, method: 'POST', path: '/mcp', headers: { ...o.headers, ...auth() }, agent: false });
        req.on('error', () => undefined);
        req.end(o.body);
        return req;
      });
      // Each call is under way: its long poll on Herald is open.
      await waitFor(() => sockets() >= baseline + 2 * n || undefined, 'the calls under way', 10_000);
      for (const req of reqs) req.destroy();
      // Gone within a few seconds (an idle keep-alive socket lingers 4 s at most), not after 25 s.
      await waitFor(() => sockets() <= baseline + 2 || undefined, 'the orphaned long polls closed', 8_000);
    });

    // Was a hole: /sse opened a session (a Server, and with HERALD_MCP_INBOX_NOTIFY a poller on
    // Herald) per GET, with no cap per principal: one read-scope token opened as many as it liked.
    it('one principal cannot open HTTP+SSE sessions without bound (a cap answers 429)', async () => {
      const t = await oauth('hoarder', 'read');
      const controllers: AbortController[] = [];
      const statuses: number[] = [];
      try {
        for (let i = 0; i < 40; i++) {
          const c = new AbortController();
          controllers.push(c);
          const res = await fetch(new URL('/sse', url()), { headers: auth(t), signal: c.signal });
          statuses.push(res.status);
          if (res.status !== 200) await res.body?.cancel();
        }
      } finally {
        for (const c of controllers) c.abort();
      }
      expect(statuses).toContain(429);
    });
  });

  describe('principals and request_ids across replicas', () => {
    it('a read-scope or expired OAuth token on 2026-07-28: no write tool listed or run; an expired one refused at the door', async () => {
      const reader = await modernOverHttp('reader', `${proxy.url}/mcp`, await oauth('reader', 'read'));
      closers.push(() => reader.close());
      const listed = (await reader.listTools()).tools.map((t) => t.name);
      expect(listed).not.toContain('post_message');
      const content = `attack reader ${newRequestId().slice(0, 8)}`;
      const r = (await reader.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content } })) as Result;
      expect(r.isError, toolText(r)).toBe(true);
      const expired = await issuer.sign({ client_id: 'late', sub: 'late', scope: 'read write', aud: 'http://mcp.test/mcp' }, { expiresIn: Math.floor(Date.now() / 1000) - 5 });
      const o = modern('tools/call', { name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content } });
      const e = await raw(url(), { headers: { ...o.headers, ...auth(expired) }, body: o.body });
      expect([401, 429]).toContain(e.status);
      expect(posted(content)).toBe(0);
    });

    it("another principal's notifications/cancelled naming the same JSON-RPC id cancels nothing of the first's", async () => {
      const waiting = modern('tools/call', { name: 'wait_for_messages', arguments: { after: '999999999', timeout_ms: 2_000 } }, 'shared-id');
      const pending = raw(url(), { headers: { ...waiting.headers, ...auth() }, body: waiting.body });
      const cancel = modern('notifications/cancelled', { requestId: 'shared-id', reason: 'mallory' });
      const notification = JSON.parse(cancel.body) as Record<string, unknown>;
      delete notification['id'];
      for (const target of urls) {
        const c = await raw(target, { headers: { ...cancel.headers, ...auth(await oauth('mallory')) }, body: JSON.stringify(notification) });
        expect(c.status, c.body).toBeLessThan(500);
      }
      const answer = await pending;
      expect(answer.status, answer.body).toBe(200);
      expect(answer.body).toContain('"event":null');
    });

    it('OAuth client ids that are Object.prototype names (__proto__, constructor, hasOwnProperty) keep their own records across replicas, and nobody else\'s', async () => {
      const names = ['__proto__', 'constructor', 'hasOwnProperty', 'toString'];
      const ids = new Map(names.map((n) => [n, newRequestId()]));
      for (const n of names) {
        const c = await mcpOverHttp(`odd-${n}`, `${proxy.url}/mcp`, await oauth(n));
        closers.push(() => c.close());
        const content = `attack odd client ${ids.get(n)?.slice(0, 8)}`;
        const args = { guild_id: IDS.guild, destination: 'alerts', content, request_id: ids.get(n) };
        const first = (await c.callTool({ name: 'post_message', arguments: args })) as Result;
        expect(toolText(first), n).toMatch(/^Posted: /);
        // Its re-issue (on the other replica: round robin) is its own replay, and its get_delivery its own.
        const again = (await c.callTool({ name: 'post_message', arguments: args })) as Result;
        expect(again.structuredContent?.['replayed'], `${n}: ${toolText(again)}`).toBe(true);
        expect(((await c.callTool({ name: 'get_delivery', arguments: { request_id: ids.get(n) } })) as Result).isError, n).not.toBe(true);
        expect(posted(content), n).toBe(1);
      }
      // A plain client reads none of theirs.
      const plain = await mcpOverHttp('plain', `${proxy.url}/mcp`, await oauth('plain'));
      closers.push(() => plain.close());
      for (const [n, id] of ids) expect(((await plain.callTool({ name: 'get_delivery', arguments: { request_id: id } })) as Result).isError, n).toBe(true);
      expect(({} as Record<string, unknown>)['messages']).toBeUndefined();
    });

    it('a forged Mcp-Session-Id on a 2025 request is ignored: served stateless, nothing of another client reachable through it', async () => {
      const l = legacy('tools/list');
      const r = await raw(url(), { headers: { ...l.headers, ...auth(), 'mcp-session-id': '00000000-0000-4000-8000-000000000000' }, body: l.body });
      expect(r.status, r.body.slice(0, 200)).toBeLessThan(500);
      expect(r.headers['mcp-session-id']).toBeUndefined();
    });

    it("another OAuth client replaying a client's request_id, on the other replica, neither reads, edits, reacts to nor deletes its message, and posts nothing", async () => {
      const alice = await modernOverHttp('alice', `${proxy.url}/mcp`, await oauth('alice'));
      const mallory = await mcpOverHttp('mallory', `${proxy.url}/mcp`, await oauth('mallory'));
      closers.push(() => alice.close(), () => mallory.close());
      const requestId = newRequestId();
      const content = `attack alice's secret ${requestId.slice(0, 8)}`;
      const first = (await alice.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content, request_id: requestId } })) as Result;
      expect(toolText(first)).toMatch(/^Posted: /);
      const link = /https:\/\/\S+/.exec(toolText(first))?.[0] ?? 'no link';
      const attempts: [string, Record<string, unknown>][] = [
        ['get_delivery', { request_id: requestId }],
        ['post_message', { guild_id: IDS.guild, destination: 'alerts', content, request_id: requestId }],
        ['post_message', { guild_id: IDS.guild, destination: 'alerts', content: 'mallory was here', request_id: requestId }],
        ['edit_message', { request_id: requestId, content: 'mallory was here' }],
        ['react', { message_ref: requestId, emoji: '👎' }],
        ['delete_message', { message_ref: requestId }],
        // Another spelling of the same id: refused by its schema, never matched loosely.
        ['get_delivery', { request_id: requestId.toUpperCase() }],
        ['edit_message', { request_id: ` ${requestId}`, content: 'mallory was here' }],
      ];
      for (let round = 0; round < 2; round++) {
        for (const [name, args] of attempts) {
          const r = (await mallory.callTool({ name, arguments: args })) as Result;
          expect(r.isError, `${name}: ${toolText(r)}`).toBe(true);
          expect(toolText(r), name).not.toContain(link);
          expect(JSON.stringify(r.structuredContent ?? {}), name).not.toContain(content);
        }
      }
      const mine = h.sandbox.allMessages().filter((m) => m.content.startsWith(content) || m.content === 'mallory was here');
      expect(mine.map((m) => m.content)).toEqual([content]);
      expect(mine[0]?.edits ?? 0).toBe(0);
      // Alice's own re-issue is hers: replayed.
      const again = (await alice.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content, request_id: requestId } })) as Result;
      expect(again.structuredContent?.['replayed']).toBe(true);
    });

    it("the static token (the connector) and an OAuth client do not share records: the client cannot read the connector's request_id", async () => {
      const connector = await modernOverHttp('connector', `${proxy.url}/mcp`, token);
      const eve = await modernOverHttp('eve', `${proxy.url}/mcp`, await oauth('eve'));
      closers.push(() => connector.close(), () => eve.close());
      const requestId = newRequestId();
      const content = `attack connector ${requestId.slice(0, 8)}`;
      expect(toolText(await connector.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content, request_id: requestId } }))).toMatch(/^Posted: /);
      const r = (await eve.callTool({ name: 'get_delivery', arguments: { request_id: requestId } })) as Result;
      expect(r.isError).toBe(true);
      const p = (await eve.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content, request_id: requestId } })) as Result;
      expect(p.isError, toolText(p)).toBe(true);
      expect(posted(content)).toBe(1);
    });

    it('the same keyed post sent at once on both replicas (a client retrying too early) is one message', async () => {
      const a = await modernOverHttp('race-a', `${urls[0]}`, token);
      const b = await mcpOverHttp('race-b', `${urls[1]}`, token);
      closers.push(() => a.close(), () => b.close());
      const requestId = newRequestId();
      const content = `attack race ${requestId.slice(0, 8)}`;
      const args = { guild_id: IDS.guild, destination: 'alerts', content, request_id: requestId };
      const answers = (await Promise.all([a, b, a, b].map((c) => c.callTool({ name: 'post_message', arguments: args })))) as Result[];
      for (const r of answers) expect(r.isError, toolText(r)).not.toBe(true);
      expect(answers.filter((r) => r.structuredContent?.['replayed'] === false).length).toBeLessThanOrEqual(1);
      expect(posted(content)).toBe(1);
    });

    // Two edits given one seq would be one request_id for two contents: the second refused (an
    // error answer). Every answer ok means distinct seqs; an edit that lands after a higher seq is
    // superseded by design (src/modules/deliveries/delivery.jobs.ts), so the message ends as one of them.
    it('edits with distinct edit_ids sent at once on both replicas are each given their own seq: none refused, the message ends as one of them', async () => {
      const a = await modernOverHttp('edits-a', `${urls[0]}`, token);
      const b = await mcpOverHttp('edits-b', `${urls[1]}`, token);
      closers.push(() => a.close(), () => b.close());
      const requestId = newRequestId();
      const content = `attack concurrent edits ${requestId.slice(0, 8)}`;
      expect(toolText(await a.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content, request_id: requestId } }))).toMatch(/^Posted: /);
      const n = 6;
      const answers = (await Promise.all(
        Array.from({ length: n }, (_, i) => (i % 2 === 0 ? a : b).callTool({ name: 'edit_message', arguments: { request_id: requestId, content: `${content} (${i})`, edit_id: newRequestId() } })),
      )) as Result[];
      for (const r of answers) expect(r.isError, toolText(r)).not.toBe(true);
      for (const r of answers) expect(r.structuredContent?.['replayed'], toolText(r)).toBe(false);
      const edited = Array.from({ length: n }, (_, i) => `${content} (${i})`);
      await waitFor(() => edited.includes(h.sandbox.allMessages().find((m) => m.content.startsWith(content))?.content ?? '') || undefined, 'the message edited');
      const message = h.sandbox.allMessages().find((m) => m.content.startsWith(content));
      expect(message?.edits ?? 0).toBeGreaterThanOrEqual(1);
      expect(message?.edits ?? 0).toBeLessThanOrEqual(n);
    });

    it('a re-issue under the same key with DIFFERENT arguments, for every keyed tool, is refused: no second action, no replay of the first', async () => {
      const client = await modernOverHttp('rekey', `${proxy.url}/mcp`, token);
      closers.push(() => client.close());
      const call = async (name: string, args: Record<string, unknown>): Promise<Result> => (await client.callTool({ name, arguments: args })) as Result;
      const run = newRequestId().slice(0, 6);
      const key = (n: number): string => `${run}${n.toString(16).padStart(2, '0')}`.padEnd(64, 'c');
      const seen: ReplaySeen = { source: '', post: key(0xe1), toDelete: key(0xe2), scrapeChannel: IDS.channels.alerts, key };
      const otherPost = key(0xe3);
      for (const id of [seen.post, seen.toDelete, otherPost]) expect(toolText(await call('post_message', { guild_id: IDS.guild, destination: 'alerts', content: `rekey target ${id.slice(0, 8)}`, request_id: id }))).toMatch(/^Posted: /);
      const pairReply = await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'pair' });
      expect((await call('pair', { code: /\*\*([A-Z2-9]{27})\*\*/.exec(pairReply.data?.content ?? '')?.[1] ?? '' })).isError).not.toBe(true);
      seen.source = h.sandbox.writeAsUser(SANDBOX_MEMBER_IDS.manager, IDS.channels.alerts, `please map digest to ops (rekey ${run})`).id;
      /** Each keyed tool's call with one argument changed (the key kept). */
      const CHANGED: Record<string, (args: Record<string, unknown>) => Record<string, unknown>> = {
        post_message: (a) => ({ ...a, content: `${String(a['content'])} CHANGED` }),
        send_dm: (a) => ({ ...a, content: `${String(a['content'])} CHANGED` }),
        edit_message: (a) => ({ ...a, content: 'rekey: CHANGED edit' }),
        react: (a) => ({ ...a, emoji: '👎' }),
        delete_message: (a) => ({ ...a, message_ref: otherPost }),
        hand_off: (a) => ({ ...a, text: `${String(a['text'])} CHANGED` }),
        send_message: (a) => ({ ...a, text: `${String(a['text'])} CHANGED` }),
        scrape_media: (a) => ({ ...a, channelId: IDS.channels.ops }),
        run_command: (a) => ({ ...a, command: `destinations set status <#${IDS.channels.ops}>` }),
      };
      expect(Object.keys(CHANGED).sort()).toEqual(Object.keys(REPLAY_SAMPLES).sort());
      const outcomes: Record<string, string> = {};
      for (const [name, sample] of Object.entries(REPLAY_SAMPLES)) {
        const args = sample(seen);
        const first = await call(name, args);
        expect(first.isError, `${name} first: ${toolText(first)}`).not.toBe(true);
        const changed = CHANGED[name]?.(args) ?? args;
        const second = await call(name, changed);
        outcomes[name] = `${second.isError === true ? 'refused' : 'ANSWERED'} replayed=${String(second.structuredContent?.['replayed'])}: ${toolText(second).slice(0, 160)}`;
      }
      const bad = Object.entries(outcomes).filter(([, o]) => !o.startsWith('refused'));
      expect(bad, JSON.stringify(outcomes, null, 2)).toEqual([]);
      expect(h.sandbox.allMessages().filter((m) => m.content.includes('CHANGED'))).toEqual([]);
      const target = h.sandbox.allMessages().find((m) => m.content.startsWith('rekey target') && m.content.includes(otherPost.slice(0, 8)));
      expect(target, 'delete under a reused key left the other post alone').toBeDefined();
    });
  });

  describe('a stream cut after the work, re-issued with other arguments', () => {
    it('post_message and edit_message cut mid-call on one replica and re-issued with another content under the same key on the other: refused, the first left as it was', async () => {
      let cutNext: string | undefined;
      const cutting = await startRoundRobinProxy(urls.map((u) => Number(new URL(u).port)), {
        hold: (body) => {
          if (cutNext === undefined || !body.includes('"tools/call"') || !body.includes(cutNext)) return false;
          cutNext = undefined;
          return true;
        },
      });
      closers.push(() => cutting.close());
      for (const [revision, connect] of [
        [MODERN_REVISION, () => modernOverHttp('cut-v2', `${cutting.url}/mcp`, token)],
        ['2025-11-25', () => mcpOverHttp('cut-v1', `${cutting.url}/mcp`, token)],
      ] as const) {
        const client = await connect();
        closers.push(() => client.close());
        const call = async (name: string, args: Record<string, unknown>): Promise<Result> => (await client.callTool({ name, arguments: args })) as Result;
        const cut = async (name: string, args: Record<string, unknown>, marker: string): Promise<void> => {
          const answered = cutting.heldAnswered;
          cutNext = marker;
          const first = call(name, args);
          await waitFor(() => cutting.heldAnswered > answered || undefined, `${revision} ${name}: the withheld answer`);
          cutting.cutHeld();
          await expect(first).rejects.toThrow();
        };
        const requestId = newRequestId();
        const content = `attack cut ${revision} ${requestId.slice(0, 8)}`;
        await cut('post_message', { guild_id: IDS.guild, destination: 'alerts', content, request_id: requestId }, requestId);
        const other = await call('post_message', { guild_id: IDS.guild, destination: 'alerts', content: `${content} OTHER`, request_id: requestId });
        expect(other.isError, `${revision}: ${toolText(other)}`).toBe(true);
        expect(other.structuredContent?.['replayed']).not.toBe(true);
        const editId = newRequestId();
        await cut('edit_message', { request_id: requestId, content: `${content} (edit)`, edit_id: editId }, editId);
        const otherEdit = await call('edit_message', { request_id: requestId, content: `${content} OTHER edit`, edit_id: editId });
        expect(otherEdit.isError, `${revision}: ${toolText(otherEdit)}`).toBe(true);
        const sent = h.sandbox.allMessages().filter((m) => m.content.startsWith(content));
        expect(sent.map((m) => [m.content, m.edits])).toEqual([[`${content} (edit)`, 1]]);
      }
    });
  });

  describe('the HTTP+SSE leg', () => {
    it('session ids are unguessable, and one principal cannot post into another principal\'s session', async () => {
      const open = async (t: string): Promise<{ endpoint: URL; close: () => void }> => {
        const controller = new AbortController();
        const res = await fetch(new URL('/sse', url()), { headers: auth(t), signal: controller.signal });
        expect(res.status).toBe(200);
        const reader = (res.body as ReadableStream<Uint8Array>).getReader();
        let seen = '';
        const endpoint = await waitFor(async () => {
          const r = await reader.read();
          seen += new TextDecoder().decode(r.value);
          return /event: endpoint\ndata: (\S+)/.exec(seen)?.[1];
        }, 'the endpoint');
        return { endpoint: new URL(endpoint ?? '', url()), close: () => controller.abort() };
      };
      const a = await open(token);
      const b = await open(await oauth('sse-b'));
      closers.push(async () => a.close(), async () => b.close());
      const ids = [a, b].map((s) => s.endpoint.searchParams.get('sessionId') ?? '');
      for (const id of ids) expect(id, 'a random UUID').toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      const content = `attack sse ${newRequestId().slice(0, 8)}`;
      const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content } } });
      // The OAuth client into the connector's session, and the connector into the client's.
      const intoA = await raw(a.endpoint.href, { path: `${a.endpoint.pathname}${a.endpoint.search}`, headers: { 'content-type': 'application/json', ...auth(await oauth('sse-b')) }, body });
      const intoB = await raw(b.endpoint.href, { path: `${b.endpoint.pathname}${b.endpoint.search}`, headers: { 'content-type': 'application/json', ...auth() }, body });
      expect([intoA.status, intoB.status]).toEqual([404, 404]);
      // Into its own session: bad JSON, another content type and an oversized body are 4xx, never 5xx.
      const own = (b: string, type = 'application/json'): Promise<RawAnswer> => raw(a.endpoint.href, { path: `${a.endpoint.pathname}${a.endpoint.search}`, headers: { 'content-type': type, ...auth() }, body: b });
      for (const [label, answer] of [
        ['bad JSON', await own('{"jsonrpc":')],
        ['text/plain', await own(body, 'text/plain')],
        ['6 MB', await own(JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content: 'z'.repeat(6 * 1024 * 1024) } } })).catch((err: unknown) => ({ status: 413, headers: {}, body: String(err) }))],
      ] as const) {
        expect(answer.status, `${label}: ${answer.body.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
        expect(answer.status, `${label}: ${answer.body.slice(0, 200)}`).toBeLessThan(500);
        expect(leaks(answer.body, [token]), label).toEqual([]);
      }
      // The session lives on one replica only: the other does not know it.
      const elsewhere = await raw(urls[1] ?? '', { path: `${a.endpoint.pathname}${a.endpoint.search}`, headers: { 'content-type': 'application/json', ...auth() }, body });
      expect(elsewhere.status).toBe(404);
      expect(posted(content)).toBe(0);
    });
  });

  describe('what answers and logs give away', () => {
    it('no log line carries a token, a bearer header or a message content, after every attack above', () => {
      expect(logged.length).toBeGreaterThan(0);
      for (const secret of [token, h.bridgeToken]) expect(logged.includes(secret), 'a token in the log').toBe(false);
      expect(logged).not.toMatch(/Bearer [A-Za-z0-9._-]{20,}/);
      for (const content of ["attack alice's secret", 'mallory was here', 'attack disconnect', 'rekey: CHANGED']) expect(logged.includes(content), `${content} in the log`).toBe(false);
    });
  });
});
