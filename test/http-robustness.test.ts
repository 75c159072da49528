import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidResponse } from './support/client.js';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';

/** One request over `agent`, with a timeout: a hang is a failure, not a stuck test. */
function request(url: string, agent: http.Agent, method: string, path: string, headers: Record<string, string>, body?: Buffer | string) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
    const req = http.request(`${url}${path}`, { method, agent, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.setTimeout(5_000, () => req.destroy(new Error(`${method} ${path}: no answer in 5 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

describe('HTTP robustness: keep-alive after 413, query strings, malformed %-escapes', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
  });
  afterAll(() => h.close());

  it('answers the next request on a keep-alive connection after a 413 (Content-Length and chunked)', async () => {
    const big = Buffer.alloc(200_000, 'x');
    for (const chunked of [false, true]) {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const auth = { authorization: `Bearer ${h.bridgeToken}`, 'content-type': 'application/json' };
        const headers = chunked ? { ...auth, 'transfer-encoding': 'chunked' } : { ...auth, 'content-length': String(big.length) };
        const refused = await request(h.url, agent, 'POST', '/mcp/deliveries', headers, big);
        expect(refused.status).toBe(413);
        expect(refused.text).toBe('{"error":"request body too large"}');
        await expectValidResponse('POST', '/mcp/deliveries', 413, JSON.parse(refused.text));
        const next = await request(h.url, agent, 'GET', '/mcp/capabilities', auth);
        expect(next.status).toBe(200);
      } finally {
        agent.destroy();
      }
    }
  });

  it('on a raw socket, a 413 either closes the connection or answers the request pipelined behind it', async () => {
    const socket = net.connect(Number(new URL(h.url).port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    let received = '';
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    let closed = false;
    socket.once('close', () => (closed = true));
    const body = 'x'.repeat(200_000);
    socket.write(`POST /mcp/deliveries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.bridgeToken}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    let outcome = 'hung';
    for (const deadline = Date.now() + 5_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 10))) {
      if (received.includes('{"status":"ok"}')) outcome = 'answered';
      else if (closed) outcome = 'closed';
      else continue;
      break;
    }
    socket.destroy();
    expect(received).toMatch(/^HTTP\/1\.1 413 /);
    expect(outcome === 'answered' || (outcome === 'closed' && /\r\nConnection: close\r\n/i.test(received))).toBe(true);
  });

  it('ignores query parameters the contract does not declare, on every operation', async () => {
    const q = '?probe=1&x=%ZZ&code=ABC';
    expect((await h.bridge.get(`/healthz${q}`)).json).toEqual({ status: 'ok' });
    expect((await h.bridge.get(`/readyz${q}`)).status).toBe(200);
    expect((await h.bridge.get(`/mcp/capabilities${q}`)).status).toBe(200);
    expect((await h.bridge.get(`/mcp/recipients${q}`)).json).toEqual({ items: [] });
    expect((await h.bridge.get(`/mcp/deliveries/${'f'.repeat(64)}${q}`)).text).toBe('{"error":"unknown request_id"}');
    expect((await h.bridge.get(`/mcp/registration/${IDS.user}${q}`)).text).toBe('{"error":"not registered"}');
    // Redeem keeps its fixed reasons.
    const wellFormed = await h.bridge.post(`/mcp/pair/redeem${q}`, { code: 'A'.repeat(27) });
    expect([wellFormed.status, wellFormed.text]).toEqual([404, '{"error":"invalid or expired code"}']);
    const malformed = await h.bridge.post(`/mcp/pair/redeem${q}`, { code: 'nope' });
    expect([malformed.status, malformed.text]).toEqual([400, '{"error":"malformed request"}']);
    const id = newRequestId();
    const created = await h.bridge.post(`/mcp/deliveries${q}`, post(id));
    expect(created.status).toBe(202);
    expect((await h.admin.get(`/admin/destinations${q}`)).status).toBe(200);
  });

  it('answers a malformed %-escape in a path parameter as that parameter says, never 500', async () => {
    for (const bad of ['%', '%E0', '%zz', 'a%', '%C3%28']) {
      for (const path of [`/mcp/deliveries/${bad}`, `/mcp/registration/${bad}`]) {
        const res = await h.bridge.get(path);
        expect([path, res.status, res.text]).toEqual([path, 404, '{"error":"not found"}']);
      }
      expect((await h.bridge.call('POST', `/mcp/deliveries/${bad}`)).status).toBe(405);
      expect((await h.admin.put(`/admin/destinations/${bad}/alerts`, { channel_id: IDS.channels.alerts })).text).toBe('{"error":"guild_id must be a snowflake"}');
      const del = await h.admin.delete(`/admin/destinations/${IDS.guild}/${bad}`);
      expect([del.status, del.text]).toEqual([400, '{"error":"destination must be one of alerts, deals, digest, ops"}']);
    }
    // Authentication still comes first.
    expect((await h.bridge.call('GET', '/mcp/deliveries/%', { token: undefined })).status).toBe(401);
  });
});
