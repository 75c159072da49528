import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { startHttp } from '../src/mcp/run.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { mcpOverHttp, mcpOverStdio, type ToolResult } from './support/mcp.js';
import { everyCall, type Seen } from './support/mcp-calls.js';
import { MODERN_REVISION, modernOverHttp, modernOverStdio } from './support/mcp-v2.js';
import { waitFor } from './support/wait.js';

/** What the walk needs of a client, whichever SDK it comes from. */
interface AnyClient {
  listTools(): Promise<{ tools: { name: string; inputSchema: Record<string, unknown> }[] }>;
  callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * Every tool from both SDKs' clients, over both transports: the v2 client speaking 2026-07-28 and
 * the 1.x client speaking 2025-11-25, each over stdio (its own `herald mcp` process) and Streamable
 * HTTP (one `herald mcp --http`). The tools are the ones each server lists, not a hand list: a tool
 * listed to one client and not another fails, and each is called (test/support/mcp-calls.ts: a
 * harmless call, or one that must answer a tool error). A call may answer a tool error; it may not
 * fail as a transport or protocol error.
 */
describe('herald mcp: every tool from the v2 and the 1.x client, over stdio and HTTP', { timeout: 240_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let server: HttpServer;
  const clients = new Map<string, AnyClient>();
  const token = newToken();

  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
    await h.mapDestination();
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    dir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-clients-'));
    const env = { HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_ADMIN_TOKEN: h.adminToken, HERALD_MCP_WAIT_MS: '10000' };
    const config = loadConfig({ ...env, HERALD_MCP_STATE: path.join(dir, 'http.json'), HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: token });
    let url: string;
    ({ url, server } = await startHttp(config, h.bridgeToken, token, createLogger('silent')));
    clients.set('v2 stdio', await modernOverStdio('walk-v2-stdio', { ...env, HERALD_MCP_STATE: path.join(dir, 'v2-stdio.json') }));
    clients.set('v2 http', await modernOverHttp('walk-v2-http', url, token));
    clients.set('1.x stdio', await mcpOverStdio('walk-v1-stdio', { ...env, HERALD_MCP_STATE: path.join(dir, 'v1-stdio.json') }));
    clients.set('1.x http', await mcpOverHttp('walk-v1-http', url, token));
  }, 240_000);
  afterAll(async () => {
    for (const c of clients.values()) await c.close();
    await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
    server?.closeAllConnections();
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('speaks 2026-07-28 to the v2 client', () => {
    for (const label of ['v2 stdio', 'v2 http']) {
      const c = clients.get(label) as unknown as { getNegotiatedProtocolVersion(): string | undefined };
      expect(c.getNegotiatedProtocolVersion(), label).toBe(MODERN_REVISION);
    }
  });

  it('lists the same tools to every client, and answers each call with a tool result', async () => {
    const listed = new Map<string, string[]>();
    for (const [label, c] of clients) listed.set(label, (await c.listTools()).tools.map((t) => t.name).sort());
    const all = [...new Set([...listed.values()].flat())].sort();
    expect(all.length).toBeGreaterThan(20);
    for (const [label, names] of listed) expect(names, `${label} lists every tool the others list`).toEqual(all);

    let n = 0;
    for (const [label, c] of clients) {
      n += 1;
      // Each client its own pairing code and its own request_id (its writes are its own).
      const pairReply = await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'pair' });
      const seen: Seen = { code: /\*\*([A-Z2-9]{27})\*\*/.exec(pairReply.data?.content ?? '')?.[1] ?? '', scrapeId: '', requestId: String(n).repeat(64) };
      const { tools } = await c.listTools();
      const calls = everyCall(tools);
      expect(Object.keys(calls).sort()).toEqual(all);
      for (const [name, row] of Object.entries(calls)) {
        const r = (await c.callTool({ name, arguments: row.args(seen) })) as ToolResult & { structuredContent?: Record<string, unknown> };
        const text = r.content?.find((p) => p.type === 'text')?.text ?? '';
        expect(text, `${label} ${name}: an answer in words`).not.toBe('');
        if (row.ok) expect(r.isError, `${label} ${name}: ${text}`).toBeFalsy();
        row.after?.(r, seen);
      }
    }
  });
});
