import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CryptoKey } from 'jose';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '../src/config.js';
import { loadOperatorPolicy } from '../src/mcp/policy.js';
import { startHttp } from '../src/mcp/run.js';
import { createLogger } from '../src/infra/log.js';
import { parsePolicy, PolicyError, refusedBy } from '../src/infra/policy/policy.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { mcpOverHttp, toolText, type ToolResult } from './support/mcp.js';
import { localIssuer, type LocalIssuer } from './support/oauth.js';
import { waitFor } from './support/wait.js';

const POLICY = `
# Every bridge-token caller: chat writes only to #agents, one reaction a minute each.
connector:
  channels: ['#agents']
  rate:
    react: { per_minute: 1 }
clients:
  reader:
    read_only: true
  capped:
    rate:
      post_message: { per_minute: 2, per_day: 100 }
  confirming:
    confirm: [post_message]
  confirming-too:
    confirm: [post_message]
`;

describe("herald mcp: OAuth mode and the operator's policy", { timeout: 180_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let issuer: LocalIssuer;
  let mcp: HttpServer;
  let url: string;
  const clients: Client[] = [];
  const staticToken = newToken();

  const connect = async (token: string): Promise<Client> => {
    const c = await mcpOverHttp('policy-test', url, token);
    clients.push(c);
    return c;
  };
  const token = (client: string, scope: string, extra: { key?: CryptoKey; expiresIn?: string | number; aud?: string } = {}): Promise<string> =>
    issuer.sign({ client_id: client, scope, aud: extra.aud ?? url }, extra);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-policy-'));
    const policyFile = path.join(dir, 'policy.yaml');
    await writeFile(policyFile, POLICY);
    issuer = await localIssuer();
    h = await startTestHerald({ env: { HERALD_POLICY: policyFile } });
    await h.mapDestination();
    const config = loadConfig({
      HERALD_URL: h.url,
      MCP_BRIDGE_TOKEN: h.bridgeToken,
      HERALD_MCP_STATE: path.join(dir, 'state.json'),
      HERALD_MCP_PORT: '0',
      HERALD_MCP_TOKEN: staticToken,
      HERALD_MCP_WAIT_MS: '10000',
      HERALD_MCP_OAUTH_ISSUER: issuer.url,
      HERALD_POLICY: policyFile,
    });
    ({ url, server: mcp } = await startHttp(config, h.bridgeToken, staticToken, createLogger('silent')));
  }, 180_000);
  afterAll(async () => {
    for (const c of clients) await c.close();
    mcp?.closeAllConnections();
    await new Promise<void>((resolve) => mcp?.close(() => resolve()));
    await issuer?.close();
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('publishes Protected Resource Metadata and points 401s at it', async () => {
    const metadataUrl = new URL('/.well-known/oauth-protected-resource/mcp', url).href;
    const metadata = await fetch(metadataUrl);
    expect(metadata.status).toBe(200);
    expect(await metadata.json()).toMatchObject({ resource: url, authorization_servers: [issuer.url], scopes_supported: ['read', 'write', 'admin'] });
    const refused = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toContain(`Bearer resource_metadata="${metadataUrl}"`);
  });

  it('accepts a valid access token, and refuses an expired one, one for another resource and a bad signature', async () => {
    const ask = async (t: string): Promise<number> =>
      (await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) })).status;
    expect(await ask(await token('anyone', 'read'))).toBe(200);
    expect(await ask(await token('anyone', 'read', { expiresIn: Math.floor(Date.now() / 1000) - 60 }))).toBe(401);
    expect(await ask(await token('anyone', 'read', { aud: 'http://127.0.0.1:1/mcp' }))).toBe(401);
    expect(await ask(await token('anyone', 'read', { key: issuer.other }))).toBe(401);
    // The static token still works beside OAuth.
    expect(await ask(staticToken)).toBe(200);
  });

  it("an HTTP+SSE session is its opener's: another client cannot post into it", async () => {
    const a = await token('client-a', 'read');
    const b = await token('client-b', 'read');
    const controller = new AbortController();
    const stream = await fetch(new URL('/sse', url), { headers: { authorization: `Bearer ${a}` }, signal: controller.signal });
    expect(stream.status).toBe(200);
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    let seen = '';
    while (!/data: (\S+)/.test(seen)) seen += new TextDecoder().decode((await reader.read()).value);
    const endpoint = new URL(/data: (\S+)/.exec(seen)?.[1] ?? '', url);
    const message = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const post = (t: string) => fetch(endpoint, { method: 'POST', headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' }, body: message });
    expect((await post(b)).status).toBe(404);
    expect((await post(a)).status).toBe(202);
    controller.abort();
  });

  it('maps scopes to tools: a read token lists and runs only read-only tools', async () => {
    const reader = await connect(await token('scoped', 'read'));
    const { tools } = await reader.listTools();
    expect(tools.length).toBeGreaterThan(5);
    expect(tools.every((t) => t.annotations?.readOnlyHint === true)).toBe(true);
    const post = (await reader.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content: 'no scope' } })) as ToolResult;
    expect(post.isError).toBe(true);
    expect(toolText(post)).toContain('rule scope');
  });

  it('a read-only client cannot post, whatever its scopes', async () => {
    const reader = await connect(await token('reader', 'read write admin'));
    expect((await reader.listTools()).tools.some((t) => t.name === 'post_message')).toBe(false);
    const content = `read-only ${Date.now()}`;
    const post = (await reader.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content } })) as ToolResult;
    expect(post.isError).toBe(true);
    expect(toolText(post)).toContain('rule read_only');
    // Its calls reach Herald as its own: Herald holds the same rule on the operation.
    const direct = await h.bridge.post('/mcp/deliveries', { request_id: 'd'.repeat(64), kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts' }, body: { content } }, { headers: { 'x-herald-policy-client': 'reader' } });
    expect(direct.status).toBe(403);
    expect(direct.json).toEqual({ error: 'refused by policy: read_only' });
    expect(h.sandbox.allMessages().filter((m) => m.content === content)).toHaveLength(0);
  });

  it('a capped client is refused at cap+1, counted in the store', async () => {
    const capped = await connect(await token('capped', 'write'));
    for (let i = 1; i <= 2; i++) {
      const ok = (await capped.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content: `capped ${i} ${Date.now()}` } })) as ToolResult;
      expect(toolText(ok)).toMatch(/^Posted: /);
    }
    const third = (await capped.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content: `capped 3 ${Date.now()}` } })) as ToolResult;
    expect(third.isError).toBe(true);
    expect(toolText(third)).toContain('refused by policy: rate_per_minute');
    // The same cap on the operation, with when a call is free again; the count is in the store every replica shares.
    const direct = await h.bridge.post('/mcp/deliveries', { request_id: 'e'.repeat(64), kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts' }, body: { content: 'capped direct' } }, { headers: { 'x-herald-policy-client': 'capped' } });
    // A rate cap is 429 (clients back off on it), with the same body shape and Retry-After.
    expect(direct.status).toBe(429);
    expect(direct.json).toEqual({ error: 'refused by policy: rate_per_minute' });
    expect(Number(direct.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const counted = await sql<{ n: string | number }>`select count(*) as n from policy_usage where subject = 'client:capped' and tool = 'post_message'`.execute(h.herald.store.db as Kysely<unknown>);
    expect(Number(counted.rows[0]?.n)).toBe(2);
    // Another client has no cap of its own: the connector's rules alone.
    const other = await connect(await token('uncapped', 'write'));
    expect(toolText(await other.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content: `uncapped ${Date.now()}` } }))).toMatch(/^Posted: /);
  });

  it("each principal counts for itself: a client the policy does not list never uses up the connector's cap, nor another client's", async () => {
    const react = (client?: string) =>
      h.bridge.post(
        '/mcp/deliveries',
        { request_id: randomBytes(32).toString('hex'), kind: 'reaction', target: { guild_id: IDS.guild, destination: 'alerts', message_id: '456789012345678901' }, body: { emoji: '👍' } },
        client === undefined ? {} : { headers: { 'x-herald-policy-client': client } },
      );
    expect((await react()).status).toBe(202);
    const over = await react();
    expect(over.status).toBe(429);
    expect(over.json).toEqual({ error: 'refused by policy: rate_per_minute' });
    // The connector's cap holds on each client too, each counting its own calls.
    for (const client of ['unlisted-one', 'unlisted-two', 'capped']) {
      expect((await react(client)).status, client).toBe(202);
      expect((await react(client)).status, client).toBe(429);
    }
  });

  it('a tool the policy wants confirmed runs only on a second call with the one-use token the first answered', async () => {
    const c = await connect(await token('confirming', 'write'));
    const tool = (await c.listTools()).tools.find((t) => t.name === 'post_message');
    expect(Object.keys(tool?.inputSchema.properties ?? {})).toContain('confirm_token');
    const args = { guild_id: IDS.guild, destination: 'alerts', content: `confirmed ${Date.now()}` };
    // confirm: true on the first call no longer confirms anything (it is not even an argument).
    expect(toolText(await c.callTool({ name: 'post_message', arguments: { ...args, confirm: true } }))).toMatch(/^Invalid arguments/);
    const first = (await c.callTool({ name: 'post_message', arguments: args })) as ToolResult;
    expect(toolText(first)).toContain('rule confirm');
    expect(h.sandbox.allMessages().filter((m) => m.content === args.content)).toHaveLength(0);
    const confirmToken = /confirm_token: "([^"]+)"/.exec(toolText(first))?.[1] ?? '';
    // Bound to the arguments: other content with this token is not confirmed.
    expect(toolText(await c.callTool({ name: 'post_message', arguments: { ...args, content: 'other', confirm_token: confirmToken } }))).toContain('not for this call');
    // Bound to the caller: another client's token is not this one's.
    const other = await connect(await token('confirming-too', 'write'));
    expect(toolText(await other.callTool({ name: 'post_message', arguments: { ...args, confirm_token: confirmToken } }))).not.toMatch(/^Posted: /);
    expect(toolText(await c.callTool({ name: 'post_message', arguments: { ...args, confirm_token: confirmToken } }))).toMatch(/^Posted: /);
    // Used once: the same token again (a new request_id) is refused by Herald, which recorded its use.
    const second = (await c.callTool({ name: 'post_message', arguments: { ...args, confirm_token: confirmToken } })) as ToolResult;
    expect(toolText(second)).not.toMatch(/^Posted: /);
    expect(h.sandbox.allMessages().filter((m) => m.content === args.content)).toHaveLength(1);
  });

  it('a disallowed channel is refused over MCP and over HTTP, and the refusals are counted', async () => {
    const agent = await connect(staticToken);
    const refused = (await agent.callTool({ name: 'send_message', arguments: { channel: '#elsewhere', text: 'nope', sender: 'agent' } })) as ToolResult;
    expect(refused.isError).toBe(true);
    expect(toolText(refused)).toContain('refused by policy: channels');
    const direct = await h.bridge.post('/mcp/chat/messages', { channel: '#elsewhere', text: 'nope', sender: 'agent' });
    expect(direct.status).toBe(403);
    expect(direct.json).toEqual({ error: 'refused by policy: channels' });
    const metrics = await waitFor(async () => {
      const text = await h.herald.registry.getSingleMetricAsString('herald_policy_refusals_total');
      return text.includes('rule="channels",surface="http"') ? text : undefined;
    }, 'the refusal metric');
    expect(metrics).toMatch(/herald_policy_refusals_total\{rule="channels",surface="http"\} [2-9]/);
    expect(metrics).toMatch(/rule="read_only",surface="http"/);
  });
});

describe('the policy file', () => {
  const known = { tools: ['post_message', 'read_messages'], platforms: ['discord', 'irc'] };
  it('lists every problem with its line', () => {
    const source = ['connector:', '  read_only: maybe', '  tools: [post_message, post_mesage]', '  platforms: [matrix]', '  rate:', '    read_messages: { per_minute: -1 }', 'clients:', '  bot: { channel: [x] }', 'extra: 1'].join('\n');
    let error: unknown;
    try {
      parsePolicy(source, 'p.yaml', known);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(PolicyError);
    expect((error as PolicyError).problems).toEqual([
      'line 2: connector.read_only must be true or false',
      'line 3: connector.tools: no tool is called post_mesage (the tools: post_message, read_messages)',
      'line 4: connector.platforms: no platform is called matrix (the platforms: discord, irc)',
      'line 6: connector.rate.read_messages.per_minute must be a whole number, 0 or more',
      'line 8: clients.bot: unknown rule channel (the rules: read_only, tools, destinations, channels, platforms, rate, confirm, files, identity)',
      'line 9: unknown section extra (the sections: connector, clients)',
    ]);
  });
  it('stops start-up with every problem listed', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'herald-policy-bad-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'policy.yaml');
    await writeFile(file, 'connector:\n  read_only: yes please\n  tools: [no_such_tool]\n');
    await expect(loadOperatorPolicy({ policyPath: file })).rejects.toThrow(/invalid policy in HERALD_POLICY.*\n {2}- line 2: connector\.read_only must be true or false\n {2}- line 3: connector\.tools: no tool is called no_such_tool/);
  });
  it('an operation is on when any tool that calls it is on (post_message polls its delivery)', () => {
    const { connector } = parsePolicy('connector:\n  tools: [post_message]\n', 'p.yaml', known);
    expect(refusedBy(connector, { tool: 'get_delivery', alsoFor: ['post_message'], writes: false })).toBeUndefined();
    expect(refusedBy(connector, { tool: 'post_message', writes: true })).toBeUndefined();
    expect(refusedBy(connector, { tool: 'get_capabilities', writes: false })).toBe('tools');
    // Reads that name a place are held by the target rules too: read_messages reached a channel whose inbox events the caller may not see.
    const agentsOnly = parsePolicy('connector:\n  channels: ["#agents"]\n  platforms: [irc]\n', 'inline', { tools: ['read_messages', 'list_channels'], platforms: ['irc', 'discord'] }).connector;
    expect(refusedBy(agentsOnly, { tool: 'read_messages', writes: false, channel: 'ops', platform: 'irc' })).toBe('channels');
    expect(refusedBy(agentsOnly, { tool: 'read_messages', writes: false, channel: '#agents', platform: 'discord' })).toBe('platforms');
    expect(refusedBy(agentsOnly, { tool: 'read_messages', writes: false, channel: '#AGENTS', platform: 'irc' })).toBeUndefined();
    expect(refusedBy(agentsOnly, { tool: 'list_channels', writes: false, platform: 'discord' })).toBe('platforms');
    // An operation that serves no tool is off under any tools rule.
    expect(refusedBy(connector, { tool: undefined, writes: true })).toBe('tools');
  });
  it('an empty file is no rules', () => {
    expect(parsePolicy('', 'p.yaml', known).connector.readOnly).toBe(false);
  });
});
