import type { Server as HttpServer } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBridgeClient } from '../src/client/bridge-client.js';
import { loadConfig } from '../src/config.js';
import { McpPolicy } from '../src/mcp/policy.js';
import { startHttp } from '../src/mcp/run.js';
import { createMcpServer } from '../src/mcp/server.js';
import { storeRecords } from '../src/mcp/state.js';
import { createLogger } from '../src/infra/log.js';
import { mcpClient, toolText, type ToolResult } from './support/mcp.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { localIssuer, type LocalIssuer } from './support/oauth.js';
import { waitFor } from './support/wait.js';

/** An HTTP+SSE session opened with `token`: where to post, and the stream's events as they come. */
interface Session {
  endpoint: URL;
  /** Resolves with the JSON-RPC answer to `id` on the stream. */
  answer(id: number): Promise<Record<string, unknown>>;
  /** Every JSON-RPC message the stream carried so far. */
  messages(): Record<string, unknown>[];
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

async function openSession(url: string, token: string): Promise<Session> {
  const controller = new AbortController();
  const stream = await fetch(new URL('/sse', url), { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
  expect(stream.status).toBe(200);
  const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
  let seen = '';
  let done = false;
  const pump = (async () => {
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        seen += new TextDecoder().decode(r.value);
      }
    } catch {
      // aborted by close()
    }
    done = true;
  })();
  const endpoint = new URL((await waitFor(() => /event: endpoint\ndata: (\S+)/.exec(seen)?.[1], 'the session endpoint')) ?? '', url);
  const messages = (): Record<string, unknown>[] => [...seen.matchAll(/data: (\{.*\})/g)].map((m) => JSON.parse(m[1] ?? '{}') as Record<string, unknown>);
  return {
    endpoint,
    messages,
    answer: (id) =>
      waitFor(() => {
        for (const m of seen.matchAll(/data: (\{.*\})/g)) {
          const msg = JSON.parse(m[1] ?? '{}') as Record<string, unknown>;
          if (msg['id'] === id) return msg;
        }
        return undefined;
      }, `answer ${id}`),
    ended: pump.then(() => undefined),
    close: () => {
      if (!done) controller.abort();
    },
  };
}

/**
 * An HTTP+SSE session is bound to the whole principal that opened it (the very token: client,
 * subject, scopes, expiry), not to a client id: a downgraded token of the same client, or another
 * subject's, cannot post into it; its token's expiry ends it, and every call is checked against it.
 */
describe('herald mcp --http: HTTP+SSE sessions are bound to their principal', { timeout: 120_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let issuer: LocalIssuer;
  let server: HttpServer;
  let url: string;
  const sessions: Session[] = [];
  const staticToken = newToken();

  const open = async (token: string): Promise<Session> => {
    const s = await openSession(url, token);
    sessions.push(s);
    return s;
  };
  const post = (s: Session, token: string, body: unknown): Promise<Response> =>
    fetch(s.endpoint, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const initialize = async (s: Session, token: string): Promise<void> => {
    expect((await post(s, token, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'sse-test', version: '1' } } })).status).toBe(202);
    await s.answer(0);
    expect((await post(s, token, { jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
  };
  const postMessage = (id: number, content: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content } } });
  const posted = (content: string) => h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.content === content);

  beforeAll(async () => {
    h = await startTestHerald();
    await h.mapDestination();
    issuer = await localIssuer();
    dir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-sse-'));
    const config = loadConfig({
      HERALD_URL: h.url,
      MCP_BRIDGE_TOKEN: h.bridgeToken,
      HERALD_MCP_STATE: path.join(dir, 'state.json'),
      HERALD_MCP_PORT: '0',
      HERALD_MCP_TOKEN: staticToken,
      HERALD_MCP_WAIT_MS: '15000',
      HERALD_MCP_OAUTH_ISSUER: issuer.url,
      HERALD_MCP_INBOX_NOTIFY: 'on',
    });
    ({ url, server } = await startHttp(config, h.bridgeToken, staticToken, createLogger('silent')));
  }, 120_000);
  afterAll(async () => {
    for (const s of sessions) s.close();
    server?.closeAllConnections();
    await new Promise<void>((resolve) => server?.close(() => resolve()));
    await issuer?.close();
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('a downgraded token or another subject of the same client cannot post into a session; its own token can', async () => {
    const writer = await issuer.sign({ client_id: 'agent', sub: 'alice', scope: 'write', aud: url });
    const s = await open(writer);
    await initialize(s, writer);
    const downgraded = await issuer.sign({ client_id: 'agent', sub: 'alice', scope: 'read', aud: url });
    const otherSubject = await issuer.sign({ client_id: 'agent', sub: 'mallory', scope: 'write', aud: url });
    const content = `sse downgraded ${Date.now()}`;
    expect((await post(s, downgraded, postMessage(1, content))).status).toBe(404);
    expect((await post(s, otherSubject, postMessage(2, content))).status).toBe(404);
    // The opener's own token runs the call, and only that one posted.
    const mine = `sse own ${Date.now()}`;
    expect((await post(s, writer, postMessage(3, mine))).status).toBe(202);
    const answer = await s.answer(3);
    expect(JSON.stringify(answer['result'])).toContain('Posted: ');
    expect(posted(mine)).toHaveLength(1);
    expect(posted(content)).toHaveLength(0);
  });

  it("a session ends when its token expires, and a call after that is refused", async () => {
    const seconds = 3;
    const shortLived = await issuer.sign({ client_id: 'agent', sub: 'alice', scope: 'write', aud: url }, { expiresIn: Math.floor(Date.now() / 1000) + seconds });
    const s = await open(shortLived);
    await initialize(s, shortLived);
    // The stream is ended by the server at the token's expiry (inbox notifications stop with it).
    await Promise.race([s.ended, new Promise((_, reject) => setTimeout(() => reject(new Error('the session outlived its token')), (seconds + 10) * 1000))]);
    const content = `sse expired ${Date.now()}`;
    expect((await post(s, shortLived, postMessage(4, content))).status).toBe(401);
    // A fresh token of the same client and subject is another principal: it opens its own session.
    const fresh = await issuer.sign({ client_id: 'agent', sub: 'alice', scope: 'write', aud: url });
    expect((await post(s, fresh, postMessage(5, content))).status).toBe(404);
    expect(posted(content)).toHaveLength(0);
  });

  it("a session is told only of the events its own client's inbox holds: no DM for a client the policy gives no send_dm", async () => {
    const reader = await issuer.sign({ client_id: 'reader', sub: 'bob', scope: 'read', aud: url });
    // A DM from a registered user (the connector's inbox holds it), then a mention in a mapped channel.
    expect((await h.sandbox.invoke({ userId: IDS.user, command: 'agent', subcommand: 'register' })).data?.content).toContain('Registered');
    const write = async (body: Record<string, unknown>): Promise<string> => {
      const res = await fetch(`${h.sandbox.url}/sandbox/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(res.status).toBe(200);
      return ((await res.json()) as { id: string }).id;
    };
    const dm = await write({ userId: IDS.user, dm: true, content: 'a private word' });
    await waitFor(async () => JSON.stringify((await h.bridge.get('/mcp/inbox?after=0&limit=100')).json).includes(dm), 'the DM in the connector\'s inbox');
    const s = await open(reader);
    await initialize(s, reader);
    const mention = await write({ userId: IDS.user, channelId: IDS.channels.alerts, content: `<@${h.sandbox.bot.id}> status?` });
    const inbox = (): Record<string, unknown>[] => s.messages().flatMap((m) => (m['method'] === 'notifications/message' ? [((m['params'] as { data: Record<string, unknown> }).data)] : []));
    await waitFor(() => inbox().find((n) => n['kind'] === 'mention'), 'the mention notified', 30_000);
    expect(mention).not.toBe(dm);
    // The DM came first and the connector sees it; this client's view has no DMs, so neither do its notifications.
    expect(inbox().filter((n) => n['kind'] === 'dm')).toEqual([]);
  });

  it('a token that names no client (no client_id, azp or sub, or an empty one) is refused: it would act as the connector', async () => {
    for (const claims of [{}, { sub: '' }, { client_id: '', azp: '', sub: '' }]) {
      const nobody = await issuer.sign({ ...claims, scope: 'read write', aud: url });
      const res = await fetch(new URL('/mcp', url), {
        method: 'POST',
        headers: { authorization: `Bearer ${nobody}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_inbox', arguments: { after: '0' } } }),
      });
      expect({ claims, status: res.status }).toEqual({ claims, status: 401 });
      const stream = await fetch(new URL('/sse', url), { headers: { authorization: `Bearer ${nobody}` } });
      expect({ claims, status: stream.status }).toEqual({ claims, status: 401 });
      await stream.body?.cancel();
    }
  });

  it('checks the session against its token on every call, not once when it opened', async () => {
    let expired = false;
    const mcp = createMcpServer(
      { bridge: createBridgeClient({ baseUrl: h.url, token: h.bridgeToken }), state: storeRecords(createBridgeClient({ baseUrl: h.url, token: h.bridgeToken }), 'connector'), waitMs: 1_000, log: createLogger('silent') },
      { policy: new McpPolicy(undefined), caller: { client: 'agent', scopes: new Set(['read']) }, lapsed: () => expired },
    );
    const [a, b] = InMemoryTransport.createLinkedPair();
    await mcp.connect(a);
    const client = await mcpClient('lapsing', b);
    try {
      expect(((await client.callTool({ name: 'list_recipients', arguments: {} })) as ToolResult).isError).not.toBe(true);
      expired = true;
      const refused = (await client.callTool({ name: 'list_recipients', arguments: {} })) as ToolResult;
      expect(refused.isError).toBe(true);
      expect(toolText(refused)).toContain('has expired');
    } finally {
      await client.close();
    }
  });
});
