import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Server as HttpServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { startHttp } from '../src/mcp/run.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { mcpOverHttp, mcpOverStdio, toolText } from './support/mcp.js';
import { waitFor } from './support/wait.js';

// An agent's pairing is one fact, kept by Herald: a code redeemed over HTTP pairs `herald mcp`'s
// send_dm too, and a code redeemed by the `pair` tool is what GET /mcp/pairing answers.
describe('one pairing, seen by every way in', { timeout: 120_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let stdio: Client;
  let http: Client;
  let httpServer: HttpServer;

  const code = async (): Promise<string> => {
    const reply = await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'pair' });
    return /\*\*([A-Z2-9]{27})\*\*/.exec(reply.data?.content ?? '')?.[1] ?? '';
  };

  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
    dir = await mkdtemp(path.join(tmpdir(), 'herald-pairing-'));
    // A state file an older herald mcp wrote, with a pairing of its own: no longer read as one.
    const file = path.join(dir, 'mcp-state.json');
    await writeFile(file, JSON.stringify({ pairing: { user_id: '999999999999999999', generation: 'x'.repeat(22), paired_at: new Date().toISOString() }, messages: {} }));
    const env = { HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_WAIT_MS: '15000' };
    stdio = await mcpOverStdio('herald-pairing', { ...env, HERALD_MCP_STATE: file });
    // Another herald mcp, over Streamable HTTP with its own state file: the same connector, so the same pairing.
    const mcpToken = newToken();
    const config = loadConfig({ ...env, HERALD_MCP_STATE: path.join(dir, 'http.json'), HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: mcpToken });
    const started = await startHttp(config, h.bridgeToken, mcpToken, createLogger('silent'));
    httpServer = started.server;
    http = await mcpOverHttp('herald-pairing-http', started.url, mcpToken);
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
  });
  afterAll(async () => {
    await stdio?.close();
    await http?.close();
    httpServer?.closeAllConnections();
    await new Promise<void>((resolve) => (httpServer === undefined ? resolve() : httpServer.close(() => resolve())));
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('redeemed over HTTP: GET /mcp/pairing answers it and send_dm over MCP reaches that user', async () => {
    expect((await h.bridge.get('/mcp/pairing')).json).toEqual({ error: 'not paired' });
    expect(toolText(await stdio.callTool({ name: 'send_dm', arguments: { content: 'before pairing' } }))).toContain('Not paired with anyone yet');
    const redeemed = await h.bridge.post('/mcp/pair/redeem', { code: await code() });
    expect(redeemed.status).toBe(200);
    const answer = redeemed.json as { discord_user_id: string; user_id: string; generation: string };
    // The protocol's field stays; the neutral one every other operation uses is beside it.
    expect(answer.discord_user_id).toBe(IDS.user);
    expect(answer.user_id).toBe(IDS.user);
    const pairing = await h.bridge.get('/mcp/pairing');
    expect(pairing.status).toBe(200);
    expect(pairing.json).toMatchObject({ user_id: IDS.user, generation: answer.generation });
    const content = `paired over http ${Date.now()}`;
    expect(toolText(await stdio.callTool({ name: 'send_dm', arguments: { content } }))).toMatch(/^DM sent: /);
    expect(h.sandbox.allMessages().filter((m) => m.content === content)).toHaveLength(1);
  });

  it('redeemed by the pair tool: the API answers the same pairing, and another client has none', async () => {
    const before = (await h.bridge.get('/mcp/pairing')).json as { paired_at: string };
    expect(toolText(await stdio.callTool({ name: 'pair', arguments: { code: await code() } }))).toBe(`Paired with Discord user ${IDS.user}. send_dm now reaches them.`);
    const after = (await h.bridge.get('/mcp/pairing')).json as { user_id: string; paired_at: string };
    expect(after.user_id).toBe(IDS.user);
    expect(after.paired_at > before.paired_at).toBe(true);
    // herald mcp over Streamable HTTP (its own state file) DMs the same user: one pairing, every transport.
    const content = `paired by the tool, sent over http ${Date.now()}`;
    expect(toolText(await http.callTool({ name: 'send_dm', arguments: { content } }))).toMatch(/^DM sent: /);
    expect(h.sandbox.allMessages().filter((m) => m.content === content)).toHaveLength(1);
    // An OAuth client of herald mcp (named by it to Herald) has its own pairing: none yet.
    expect((await h.bridge.get('/mcp/pairing', { headers: { 'x-herald-policy-client': 'someone-else' } })).json).toEqual({ error: 'not paired' });
  });
});
