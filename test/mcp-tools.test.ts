import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Server as HttpServer } from 'node:http';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startHttp } from '../src/mcp/run.js';
import { mcpTools } from '../src/mcp/tools.js';
import { createLogger } from '../src/infra/log.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { mcpClient, mcpOverHttp, type ToolResult } from './support/mcp.js';
import { waitFor } from './support/wait.js';
import { CALLS, everyCall, type Seen } from './support/mcp-calls.js';

/** Every tool the modules declare, as `herald mcp` serves them. */
const DECLARED = mcpTools();

/** Every declared tool's call: the scenario's rows first, in their order, then the rest. */
const TOOLS = everyCall(DECLARED);

describe('herald mcp: every tool, as the official SDK client sees it', { timeout: 180_000 }, () => {
  let h: TestHerald;
  let stateDir: string;
  let server: HttpServer;
  let url: string;
  let client: Client;
  const token = newToken();

  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
    await h.mapDestination();
    stateDir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-tools-'));
    const config = loadConfig({
      HERALD_URL: h.url,
      MCP_BRIDGE_TOKEN: h.bridgeToken,
      HERALD_ADMIN_TOKEN: h.adminToken,
      HERALD_MCP_STATE: path.join(stateDir, 'state.json'),
      HERALD_MCP_PORT: '0',
      HERALD_MCP_TOKEN: token,
      HERALD_MCP_WAIT_MS: '10000',
    });
    ({ url, server } = await startHttp(config, h.bridgeToken, token, createLogger('silent')));
    client = await mcpOverHttp('every-tool', url, token);
  }, 180_000);
  afterAll(async () => {
    await client?.close();
    await new Promise<void>((resolve) => server?.close(() => resolve()));
    server?.closeAllConnections();
    await h?.close();
    if (stateDir !== undefined) await rm(stateDir, { recursive: true, force: true });
  });

  it('lists every tool the modules declare, with a title, its four hints as declared, and an output schema', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(DECLARED.map((t) => t.name).sort());
    // Every scenario row is a declared tool (a renamed tool leaves no stale row).
    expect(Object.keys(CALLS).filter((name) => !DECLARED.some((t) => t.name === name))).toEqual([]);
    for (const t of tools) {
      const { readOnlyHint, destructiveHint, idempotentHint, openWorldHint } = DECLARED.find((d) => d.name === t.name)?.annotations ?? {};
      expect(t.annotations, t.name).toMatchObject({ readOnlyHint, destructiveHint, idempotentHint, openWorldHint });
      expect(t.title, t.name).toMatch(/^\S/);
      expect(t.outputSchema?.type, t.name).toBe('object');
      // What a call says about idempotence matches the hint: a non-idempotent write says why.
      if (!idempotentHint && !readOnlyHint && /request_id/.test(JSON.stringify(t.inputSchema))) expect(t.description, t.name).toContain('not idempotent');
    }
  });

  it('calls every tool; each result carries structuredContent valid against the tool\'s output schema', async () => {
    const { tools } = await client.listTools();
    const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    const pairReply = await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'pair' });
    const seen: Seen = { code: /\*\*([A-Z2-9]{27})\*\*/.exec(pairReply.data?.content ?? '')?.[1] ?? '', scrapeId: '', requestId: 'c'.repeat(64) };
    let validated = 0;
    for (const [name, row] of Object.entries(TOOLS)) {
      const schema = tools.find((t) => t.name === name)?.outputSchema;
      const r = (await client.callTool({ name, arguments: row.args(seen) })) as ToolResult & { structuredContent?: Record<string, unknown> };
      if (row.ok) expect(r.isError, `${name}: ${JSON.stringify(r.content)}`).toBeFalsy();
      if (r.isError !== true) {
        expect(r.structuredContent, name).toBeDefined();
        const validate = ajv.compile(schema ?? {});
        expect(validate(r.structuredContent), `${name}: ${JSON.stringify(validate.errors)}`).toBe(true);
        validated += 1;
      }
      row.after?.(r, seen);
    }
    expect(validated).toBeGreaterThanOrEqual(Object.values(TOOLS).filter((r) => r.ok).length);
  });

  it('negotiates each protocol revision the SDK supports, for an old and a new client on the same server', async () => {
    for (const version of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07']) {
      const res = await fetch(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'old', version: '0' } } }),
      });
      expect(res.status).toBe(200);
      expect(await res.text()).toContain(`"protocolVersion":"${version}"`);
    }
    // The SDK's own client speaks the newest.
    expect(client.getServerVersion()?.name).toBe('herald');
    // An old client on the deprecated HTTP+SSE transport, same port and token.
    const sse = await mcpClient('old-sse', new SSEClientTransport(new URL('/sse', url), { requestInit: { headers: { authorization: `Bearer ${token}` } }, eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${token}` } }) } }));
    try {
      expect((await sse.listTools()).tools.length).toBe(Object.keys(TOOLS).length);
      expect((await sse.callTool({ name: 'get_capabilities', arguments: {} })).structuredContent).toMatchObject({ targeted_post: true });
    } finally {
      await sse.close();
    }
  });

  it('refuses a browser origin not allowed (403) before the token; a loopback origin passes', async () => {
    const evil = await fetch(url, { method: 'POST', headers: { origin: 'http://evil.example', authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{}' });
    expect(evil.status).toBe(403);
    expect(await evil.json()).toEqual({ error: 'origin not allowed' });
    const sse = await fetch(new URL('/sse', url), { headers: { origin: 'http://evil.example', authorization: `Bearer ${token}` } });
    expect(sse.status).toBe(403);
    const local = await fetch(url, { method: 'POST', headers: { origin: 'http://localhost:6274', 'content-type': 'application/json' }, body: '{}' });
    expect(local.status).toBe(401);
  });

  it('throttles failed authentications as the API does: 429 with Retry-After after 10 in a minute', async () => {
    let last: Response | undefined;
    for (let i = 0; i < 12; i++) last = await fetch(url, { method: 'POST', headers: { authorization: 'Bearer wrong', 'content-type': 'application/json' }, body: '{}' });
    expect(last?.status).toBe(429);
    expect(Number(last?.headers.get('retry-after'))).toBeGreaterThan(0);
    // The right token is never refused.
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  });
});
