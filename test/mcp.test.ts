import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Server as HttpServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { startHttp } from '../src/mcp/run.js';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { testDatabase } from './support/db.js';
import { SANDBOX_MEMBER_IDS } from '../src/platforms/discord/sandbox/sandbox.js';
import { heraldEnv, IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { startHeraldProcess } from './support/process.js';
import { mcpOverHttp, mcpOverStdio, toolText, type ToolResult } from './support/mcp.js';
import { freePort } from './support/ports.js';
import { waitFor } from './support/wait.js';

describe('herald mcp: tools over stdio and Streamable HTTP', () => {
  let h: TestHerald;
  let stateDir: string;
  let stdio: Client;
  let http: Client;
  let httpServer: HttpServer;
  let httpUrl: string;
  const mcpToken = newToken();

  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
    await h.mapDestination();
    stateDir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-'));
    const env = { HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_STATE: path.join(stateDir, 'stdio.json'), HERALD_MCP_WAIT_MS: '15000' };
    stdio = await mcpOverStdio('herald-test', env);
    const config = loadConfig({ ...env, HERALD_MCP_STATE: path.join(stateDir, 'http.json'), HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: mcpToken });
    ({ url: httpUrl, server: httpServer } = await startHttp(config, h.bridgeToken, mcpToken, createLogger('silent')));
    http = await mcpOverHttp('herald-test-http', httpUrl, mcpToken);
  });
  afterAll(async () => {
    await stdio?.close();
    await http?.close();
    await new Promise<void>((resolve) => httpServer?.close(() => resolve()));
    await h?.close();
    await rm(stateDir, { recursive: true, force: true });
  });

  it('lists the tools, with input schemas taken from the contract', async () => {
    for (const client of [stdio, http]) {
      const { tools } = await client.listTools();
      // Grouped by the module that owns them: deliveries, identity, commands, handoffs, the media archive, chat, files, then the inbox.
      expect(tools.map((t) => t.name)).toEqual([
        'get_capabilities',
        'post_message',
        'send_dm',
        'edit_message',
        'react',
        'delete_message',
        'get_delivery',
        'pair',
        'list_recipients',
        'list_commands',
        'describe_command',
        'run_command',
        'hand_off',
        'list_handoffs',
        'wait_for_handoff',
        'scrape_media',
        'list_media_scrapes',
        'get_media_scrape',
        'stop_media_scrape',
        'query_media',
        'get_media_item',
        'get_media_storage',
        'delete_media_scrape',
        'send_message',
        'read_messages',
        'create_channel',
        'list_channels',
        'get_members',
        'download_attachment',
        'wait_for_messages',
        'list_inbox',
        'ack_inbox',
      ]);
      const post = tools.find((t) => t.name === 'post_message');
      const props = post?.inputSchema.properties as Record<string, Record<string, unknown>>;
      expect(props['content']).toMatchObject({ type: 'string', minLength: 1, maxLength: 2000 });
      expect(props['destination']).toMatchObject({ enum: ['alerts', 'deals', 'digest', 'ops'] });
      expect(props['card']?.['properties']).toMatchObject({ title: { maxLength: 256 } });
      expect(JSON.stringify(post?.inputSchema)).not.toContain('x-herald');
      // A field the contract describes beside its `$ref` keeps that description.
      const run = tools.find((t) => t.name === 'run_command')?.inputSchema.properties as Record<string, Record<string, unknown>>;
      expect(run['sourceMessageId']).toMatchObject({ type: 'string', pattern: '^[0-9]{17,20}$', description: expect.stringContaining('The user\'s real message') });
      expect(JSON.stringify(run)).not.toContain('x-herald');
      for (const t of tools) expect(t.description?.length ?? 0).toBeGreaterThan(40);
    }
  });

  it('get_capabilities describes what the bridge does', async () => {
    const text = toolText(await stdio.callTool({ name: 'get_capabilities', arguments: {} }));
    expect(text).toContain('Posts: yes. DMs: yes. Edits: yes.');
    expect(text).toContain('- alerts: Time-sensitive findings and warnings');
  });

  it('get_capabilities with a guild_id says which destinations that server has mapped', async () => {
    const text = toolText(await stdio.callTool({ name: 'get_capabilities', arguments: { guild_id: IDS.guild } }));
    expect(text).toContain(`Destinations in server ${IDS.guild}:`);
    expect(text).toContain('- alerts: Time-sensitive findings and warnings — mapped');
    expect(text).toContain('- deals: Notable deals or opportunities — NOT mapped: a post here fails until the operator maps a channel');
  });

  it('post_message posts once and answers with the link, over both transports', async () => {
    for (const [client, label] of [
      [stdio, 'stdio'],
      [http, 'http'],
    ] as const) {
      const content = `mcp post over ${label} ${Date.now()}`;
      const result = await client.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content } });
      const sent = h.sandbox.allMessages().filter((m) => m.content === content);
      expect(sent).toHaveLength(1);
      expect(toolText(result)).toContain(`Posted: https://discord.com/channels/${IDS.guild}/${IDS.channels.alerts}/${sent[0]?.id}`);
      const requestId = /request_id: ([0-9a-f]{64})/.exec(toolText(result))?.[1] ?? '';
      expect(toolText(await client.callTool({ name: 'get_delivery', arguments: { request_id: requestId } }))).toContain('Posted: https://');
    }
  });

  it('refuses bad arguments with a clear error, and reports failures with what they mean', async () => {
    const bad = (await stdio.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'general', content: 'x' } })) as ToolResult;
    expect(bad.isError).toBe(true);
    expect(toolText(bad)).toMatch(/^Invalid arguments: destination must be one of alerts, deals, digest, ops \(destination: alerts: time-sensitive /);
    // A pairing code in the wrong shape: what a code looks like (the bridge's answer is the protocol's fixed `malformed request`).
    const code = (await stdio.callTool({ name: 'pair', arguments: { code: 'abc-123' } })) as ToolResult;
    expect(toolText(code)).toBe('Invalid arguments: code must be a string matching ^[A-Z2-9]{27}$ (code: The pairing code, 27 characters A-Z and 2-9).');
    const extra = (await stdio.callTool({ name: 'get_delivery', arguments: { request_id: 'a'.repeat(64), requestId: 'x' } })) as ToolResult;
    expect(toolText(extra)).toBe('Invalid arguments: unknown field "requestId": the fields are request_id.');
    const unmapped = (await stdio.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'deals', content: 'nowhere' } })) as ToolResult;
    expect(unmapped.isError).toBe(true);
    expect(toolText(unmapped)).toContain(`Not delivered (UPSTREAM_UNAVAILABLE): no channel is mapped for the deals destination in server ${IDS.guild}. Do not retry`);
    const requestId = /request_id: ([0-9a-f]{64})/.exec(toolText(unmapped))?.[1] ?? '';
    expect(toolText(await stdio.callTool({ name: 'get_delivery', arguments: { request_id: requestId } }))).toContain('no channel is mapped for the deals destination');
  });

  it('pairs, DMs the paired user, edits that DM, and lists recipients', async () => {
    expect(toolText(await stdio.callTool({ name: 'send_dm', arguments: { content: 'too early' } }))).toContain('Not paired with anyone yet');
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    const pairReply = await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'pair' });
    const code = /\*\*([A-Z2-9]{27})\*\*/.exec(pairReply.data?.content ?? '')?.[1] ?? '';
    expect(toolText(await stdio.callTool({ name: 'pair', arguments: { code } }))).toBe(`Paired with Discord user ${IDS.user}. send_dm now reaches them.`);
    expect(toolText(await stdio.callTool({ name: 'pair', arguments: { code } }))).toContain('invalid, expired or already used');

    const dm = await stdio.callTool({ name: 'send_dm', arguments: { content: 'mcp dm v1' } });
    expect(toolText(dm)).toMatch(/^DM sent: https:\/\/discord\.com\/channels\/@me\//);
    const ref = /request_id: ([0-9a-f]{64})/.exec(toolText(dm))?.[1] ?? '';
    const edited = await stdio.callTool({ name: 'edit_message', arguments: { message_ref: ref, content: 'mcp dm v2' } });
    expect(toolText(edited)).toMatch(/^Edited: https:\/\/discord\.com\/channels\/@me\//);
    const message = h.sandbox.allMessages().find((m) => m.content === 'mcp dm v2');
    expect(message?.edits).toBe(1);
    expect(h.sandbox.allMessages().filter((m) => m.content.startsWith('mcp dm v'))).toHaveLength(1);
    // The same connector through another herald mcp (its own HERALD_MCP_STATE): the records are Herald's, so it edits it too.
    expect(toolText(await http.callTool({ name: 'edit_message', arguments: { message_ref: ref, content: 'mcp dm v3' } }))).toMatch(/^Edited: https:\/\/discord\.com\/channels\/@me\//);
    expect(h.sandbox.allMessages().find((m) => m.content === 'mcp dm v3')?.edits).toBe(2);
    expect(toolText(await stdio.callTool({ name: 'list_recipients', arguments: {} }))).toContain(`Roshne (${IDS.user})`);
  });

  it('refuses to DM after the user revoked and registered again, until paired again', async () => {
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'unregister' });
    expect(toolText(await stdio.callTool({ name: 'send_dm', arguments: { content: 'after unregister' } }))).toContain('has unregistered');
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    const refused = (await stdio.callTool({ name: 'send_dm', arguments: { content: 'after re-register' } })) as ToolResult;
    expect(refused.isError).toBe(true);
    expect(toolText(refused)).toContain('Refusing to DM until you pair again');
    expect(h.sandbox.allMessages().filter((m) => m.content.startsWith('after '))).toHaveLength(0);
    const pairReply = await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'pair' });
    const code = /\*\*([A-Z2-9]{27})\*\*/.exec(pairReply.data?.content ?? '')?.[1] ?? '';
    await stdio.callTool({ name: 'pair', arguments: { code } });
    expect(toolText(await stdio.callTool({ name: 'send_dm', arguments: { content: 'after pairing again' } }))).toMatch(/^DM sent:/);
  });

  it('answers 401 to a Streamable HTTP client without the token', async () => {
    const res = await fetch(httpUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(401);
  });

  it('lists, describes (by alias) and validates commands as a Discord user, with that user permissions from Discord', async () => {
    const list = JSON.parse(toolText(await stdio.callTool({ name: 'list_commands', arguments: {} }))) as { fingerprint: string; commands: { name: string }[] };
    expect(list.commands.map((c) => c.name)).toEqual(['agent', 'destinations', 'media']);
    expect(JSON.parse(toolText(await http.callTool({ name: 'describe_command', arguments: { name: 'dest' } })))).toMatchObject({ name: 'destinations', aliases: ['dest', 'destination'] });
    const invocation = { command: `destinations set alerts <#${IDS.channels.ops}>`, guildId: IDS.guild, channelId: IDS.channels.alerts };
    const allowed = (await stdio.callTool({ name: 'run_command', arguments: { ...invocation, userId: SANDBOX_MEMBER_IDS.manager } })) as ToolResult;
    expect(allowed.isError).toBeUndefined();
    expect(JSON.parse(toolText(allowed))).toMatchObject({ ok: true, mode: 'validate', sideEffectsMayHaveOccurred: false });
    const refused = (await stdio.callTool({ name: 'run_command', arguments: { ...invocation, userId: IDS.user } })) as ToolResult;
    expect(refused.isError).toBe(true);
    expect(JSON.parse(toolText(refused))).toMatchObject({ ok: false, error: { category: 'unmet_precondition', precondition: 'manage_guild' } });
  });
});

describe('herald mcp when Herald is not running', () => {
  it('answers each call within a few seconds, naming the URL it tried and HERALD_URL', async () => {
    const stateDir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-down-'));
    onTestFinished(() => rm(stateDir, { recursive: true, force: true }));
    const url = `http://127.0.0.1:${await freePort()}`;
    const mcp = await mcpOverStdio('herald-test', { HERALD_URL: url, MCP_BRIDGE_TOKEN: newToken(), HERALD_MCP_STATE: path.join(stateDir, 's.json') });
    onTestFinished(() => mcp.close());
    for (const [name, args] of [
      ['get_capabilities', {}],
      ['post_message', { guild_id: IDS.guild, destination: 'alerts', content: 'nobody home' }],
      ['get_delivery', { request_id: 'a'.repeat(64) }],
    ] as const) {
      const started = Date.now();
      const result = (await mcp.callTool({ name, arguments: args })) as ToolResult;
      const ms = Date.now() - started;
      expect(result.isError, name).toBe(true);
      expect(toolText(result)).toContain(`Herald could not be reached at ${url} (connect ECONNREFUSED 127.0.0.1:${new URL(url).port}). `);
      expect(toolText(result)).toContain('set HERALD_URL for this MCP server to its address');
      // The retry budget for a Herald never reached is 2 s; the rest is a busy machine's slack.
      expect(ms, name).toBeLessThan(8_000);
    }
  });
});

describe('herald mcp when the bridge is killed during post_message', () => {
  // Three bridge start-ups and two recoveries: on a busy 2-core machine each start-up alone can take
  // tens of seconds, so every wait below is on a condition, with a budget that allows for that.
  const START_MS = 120_000;
  it('retries through a restart and the message appears once', { timeout: 400_000 }, async () => {
    const cleanups: (() => Promise<unknown>)[] = [];
    // Runs even when the test times out, unlike a finally block after an await that never settles.
    onTestFinished(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    });
    const sandbox = await new DiscordSandbox().start();
    cleanups.push(() => sandbox.close());
    const db = await testDatabase();
    cleanups.push(() => db.drop());
    const stateDir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-'));
    cleanups.push(() => rm(stateDir, { recursive: true, force: true }));
    const port = await freePort();
    const bridgeToken = newToken();
    const adminToken = newToken();
    const env = heraldEnv(
      { sandbox, db, bridgeToken, adminToken },
      { PORT: String(port), HERALD_DISCORD_TIMEOUT_MS: '1000', HERALD_LEASE_MS: '2000', HERALD_GATEWAY: 'off' },
    );
    let bridge = await startHeraldProcess(['serve'], env, START_MS);
    cleanups.push(async () => {
      bridge.kill('SIGKILL');
      await bridge.closed;
    });
    // The tool waits (and retries the bridge) longer than a bridge start-up can take here.
    const mcp = await mcpOverStdio('herald-test', { HERALD_URL: `http://127.0.0.1:${port}`, MCP_BRIDGE_TOKEN: bridgeToken, HERALD_MCP_STATE: path.join(stateDir, 's.json'), HERALD_MCP_WAIT_MS: String(2 * START_MS) });
    cleanups.push(() => mcp.close());
    await fetch(`http://127.0.0.1:${port}/admin/destinations/${IDS.guild}/alerts`, { method: 'PUT', headers: { authorization: `Bearer ${adminToken}` }, body: JSON.stringify({ channel_id: IDS.channels.alerts }) });
    // Discord creates the message but holds its answer; the bridge dies before recording it.
    sandbox.inject({ method: 'POST', path: '/messages$', action: 'delay_after_create', ms: 600_000 });
    const content = `survives a restart ${Date.now()}`;
    const call = mcp.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content } }, undefined, { timeout: 3 * START_MS });
    await waitFor(() => sandbox.allMessages().some((m) => m.content === content), 'Discord to create the message', START_MS);
    bridge.kill('SIGKILL');
    await bridge.closed;
    sandbox.clearFaults();
    bridge = await startHeraldProcess(['serve'], env, START_MS);
    const result = await call;
    expect(toolText(result)).toMatch(/^Posted: https:\/\/discord\.com\/channels\//);
    expect(sandbox.allMessages().filter((m) => m.content === content)).toHaveLength(1);

    // The bridge down when the tool is called: its POST is retried until the bridge is back.
    bridge.kill('SIGKILL');
    await bridge.closed;
    const later = `sent while down ${Date.now()}`;
    const pending = mcp.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content: later } }, undefined, { timeout: 3 * START_MS });
    bridge = await startHeraldProcess(['serve'], env, START_MS);
    expect(toolText(await pending)).toMatch(/^Posted: /);
    expect(sandbox.allMessages().filter((m) => m.content === later)).toHaveLength(1);
  });
});

