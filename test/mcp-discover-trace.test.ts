import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { startHttp } from '../src/mcp/run.js';
import { IDS, newRequestId, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { MODERN_REVISION, modernOverHttp } from './support/mcp-v2.js';
import { waitFor } from './support/wait.js';

/** A JSON log kept as parsed lines, for a test to read. */
function logLines(): { stream: Writable; lines: Record<string, unknown>[]; raw: string[] } {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n').filter((l) => l !== '')) {
        raw.push(line);
        lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  return { stream, lines, raw };
}

/**
 * Discovery and trace context (MCP 2026-07-28): `server/discover` names Herald's own version and
 * says what Herald is and how to re-issue a write; the lists carry cache hints (discovery public,
 * the per-caller tool list private); a call's W3C `traceparent` puts its trace id on herald mcp's
 * line for the call (beside its request_id) and on Herald's request line for the bridge call it
 * made; a malformed one is no trace and is never written to either log.
 */
describe('herald mcp: server/discover, cache hints and trace context', { timeout: 120_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let server: HttpServer;
  let url: string;
  let client: Client;
  const token = newToken();
  const heraldLog = logLines();
  const mcpLog = logLines();

  beforeAll(async () => {
    h = await startTestHerald({ env: { LOG_LEVEL: 'debug' }, logTo: heraldLog.stream });
    await h.mapDestination();
    dir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-trace-'));
    const config = loadConfig({ HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_STATE: path.join(dir, 'state.json'), HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: token, HERALD_MCP_WAIT_MS: '10000' });
    ({ url, server } = await startHttp(config, h.bridgeToken, token, createLogger('info', mcpLog.stream)));
    client = await modernOverHttp('trace', url, token);
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
    server?.closeAllConnections();
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('server/discover names Herald and its version, says how to re-issue a write, and may be cached by anyone', async () => {
    const pkg = JSON.parse(await readFile('package.json', 'utf8')) as { version: string };
    expect(client.getServerVersion()).toMatchObject({ name: 'herald', version: pkg.version });
    expect(client.getInstructions()).toMatch(/chat bridge/);
    expect(client.getInstructions()).toMatch(/same request_id/);
    const discovered = client.getDiscoverResult() as unknown as Record<string, unknown>;
    expect(discovered['supportedVersions']).toContain(MODERN_REVISION);
    expect(discovered).toMatchObject({ cacheScope: 'public', ttlMs: 3_600_000 });
  });

  it("tools/list is the caller's own to cache (private, short-lived)", async () => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN_REVISION, 'mcp-method': 'tools/list' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN_REVISION, 'io.modelcontextprotocol/clientCapabilities': {} } } }),
    });
    expect(res.status).toBe(200);
    const body = await res.text();
    const json = body.startsWith('{') ? body : (/^data: (.*)$/m.exec(body)?.[1] ?? '');
    const { result } = JSON.parse(json) as { result: { tools: unknown[]; ttlMs: number; cacheScope: string } };
    expect(result.tools.length).toBeGreaterThan(20);
    expect(result).toMatchObject({ cacheScope: 'private', ttlMs: 60_000 });
  });

  it("a call's traceparent: its trace id beside the request_id in herald mcp's log, and on Herald's request line", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const requestId = newRequestId();
    const r = await client.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content: 'traced', request_id: requestId }, _meta: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` } });
    expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    const call = await waitFor(() => mcpLog.lines.find((l) => l['msg'] === 'tool call' && l['request_id'] === requestId), "herald mcp's line for the call");
    expect(call).toMatchObject({ tool: 'post_message', trace_id: traceId, span_id: '00f067aa0ba902b7' });
    const line = await waitFor(() => heraldLog.lines.find((l) => l['msg'] === 'request' && l['trace_id'] === traceId && l['method'] === 'POST'), "Herald's request line with the trace id");
    expect(line['path']).toBe('/mcp/deliveries');
  });

  it('a malformed traceparent is no trace: nothing of it in either log', async () => {
    const bad = ['00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01', '00-00000000000000000000000000000000-00f067aa0ba902b7-01', 'zz-forged"trace-id', `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01-extra`];
    for (const traceparent of bad) {
      const r = await client.callTool({ name: 'list_inbox', arguments: {}, _meta: { traceparent } });
      expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    }
    const calls = await waitFor(() => {
      const seen = mcpLog.lines.filter((l) => l['msg'] === 'tool call' && l['tool'] === 'list_inbox');
      return seen.length >= bad.length ? seen : undefined;
    }, "herald mcp's lines for the calls");
    for (const c of calls) expect(c['trace_id']).toBeUndefined();
    await waitFor(() => heraldLog.lines.filter((l) => l['msg'] === 'request' && String(l['path']).includes('inbox')).length >= bad.length, "Herald's request lines");
    for (const b of bad) {
      for (const log of [mcpLog.raw, heraldLog.raw]) expect(log.join('\n')).not.toContain(b.slice(3, 35));
    }
    // The header went on, as received, only when valid: Herald's lines for these calls carry no trace.
    expect(heraldLog.lines.filter((l) => l['msg'] === 'request' && String(l['path']).includes('inbox') && l['trace_id'] !== undefined)).toEqual([]);
  });
});
