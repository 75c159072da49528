import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { startHttp } from '../src/mcp/run.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { modernOverHttp, modernOverStdio } from './support/mcp-v2.js';
import { localIssuer, type LocalIssuer } from './support/oauth.js';
import { waitFor } from './support/wait.js';

type Updated = { uri: string; _meta?: Record<string, unknown> };

/**
 * The inbox as a 2026-07-28 subscription: a v2 client listening (`subscriptions/listen`) to its
 * inbox resource is told of each new event by `notifications/resources/updated`, naming the event
 * (never its content) — a wake-up: it reads with list_inbox and acknowledges with ack_inbox. A
 * caller listens to its own inbox only; another's URI is refused before the stream opens. An OAuth
 * client's stream ends when its token expires.
 */
describe('herald mcp: the inbox as a subscription (subscriptions/listen)', { timeout: 180_000 }, () => {
  let h: TestHerald;
  let issuer: LocalIssuer;
  let dir: string;
  let server: HttpServer;
  let url: string;
  const token = newToken();
  const clients: Client[] = [];

  const mention = async (content: string): Promise<string> => {
    const res = await fetch(`${h.sandbox.url}/sandbox/api/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: IDS.user, channelId: IDS.channels.ops, content: `<@${h.sandbox.bot.id}> ${content}` }),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  };
  const connect = async (name: string, bearer: string): Promise<{ client: Client; heard: Updated[] }> => {
    const client = await modernOverHttp(name, url, bearer);
    clients.push(client);
    const heard: Updated[] = [];
    client.setNotificationHandler('notifications/resources/updated', (n) => {
      heard.push(n.params as Updated);
    });
    return { client, heard };
  };

  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.gatewaySessions === 1 && h.sandbox.commands.length > 0, 'Herald on the gateway', 120_000);
    await h.mapDestination('ops', IDS.channels.ops);
    issuer = await localIssuer();
    dir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-listen-'));
    const config = loadConfig({ HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_STATE: path.join(dir, 'state.json'), HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: token, HERALD_MCP_OAUTH_ISSUER: issuer.url });
    ({ url, server } = await startHttp(config, h.bridgeToken, token, createLogger('silent')));
  }, 180_000);
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
    await issuer?.close();
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('a new inbox event reaches a listener as resources/updated, by id only; list_inbox reads it and ack_inbox acknowledges it', async () => {
    const { client, heard } = await connect('listener', token);
    const listed = await client.listResources();
    expect(listed.resources.map((r) => r.uri)).toEqual(['herald://inbox/connector']);
    const sub = await client.listen({ resourceSubscriptions: ['herald://inbox/connector'] });
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['herald://inbox/connector']);
    const secret = `the vault code is ${Date.now()}`;
    const messageId = await mention(secret);
    const note = await waitFor(() => heard.find((n) => n.uri === 'herald://inbox/connector'), 'a resources/updated notification', 30_000);
    expect(JSON.stringify(note)).not.toContain(secret);
    const named = note._meta?.['dev.herald/inbox_event'] as { inbox_event: string; kind: string; channel_id: string };
    expect(named).toMatchObject({ kind: 'mention', channel_id: IDS.channels.ops });
    // The notification is a wake-up: the event is read with list_inbox (or the resource), then acknowledged.
    const r = await client.callTool({ name: 'list_inbox', arguments: {} });
    const items = (r.structuredContent as { items: { id: string; message_id: string; content: string }[] }).items;
    const event = items.find((e) => e.message_id === messageId);
    expect(event?.id).toBe(named.inbox_event);
    expect(event?.content).toContain(secret);
    const read = await client.readResource({ uri: 'herald://inbox/connector' });
    expect(JSON.stringify(read.contents)).toContain(named.inbox_event);
    const acked = await client.callTool({ name: 'ack_inbox', arguments: { cursor: named.inbox_event } });
    expect(acked.isError).toBeFalsy();
    // The next event is told too, once each.
    await mention('and another');
    await waitFor(() => (heard.length >= 2 ? true : undefined), 'a second notification', 30_000);
    const ids = heard.map((n) => (n._meta?.['dev.herald/inbox_event'] as { inbox_event: string }).inbox_event);
    expect(new Set(ids).size).toBe(ids.length);
    await sub.close();
    expect(await sub.closed).toBe('local');
  });

  it('over stdio too: a listener on the connector\'s inbox hears a new event', async () => {
    const client = await modernOverStdio('stdio-listener', { HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_STATE: path.join(dir, 'stdio.json') });
    clients.push(client);
    const heard: Updated[] = [];
    client.setNotificationHandler('notifications/resources/updated', (n) => {
      heard.push(n.params as Updated);
    });
    const sub = await client.listen({ resourceSubscriptions: ['herald://inbox/connector'] });
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['herald://inbox/connector']);
    const messageId = await mention('heard over stdio');
    // At least once: an older unacknowledged event may be told first; this one is told too.
    const id = await waitFor(async () => {
      const r = await client.callTool({ name: 'list_inbox', arguments: {} });
      return (r.structuredContent as { items: { id: string; message_id: string }[] }).items.find((e) => e.message_id === messageId)?.id;
    }, 'the event in list_inbox', 30_000);
    await waitFor(() => heard.find((n) => (n._meta?.['dev.herald/inbox_event'] as { inbox_event?: string } | undefined)?.inbox_event === id), 'its resources/updated', 30_000);
    expect(heard.every((n) => n.uri === 'herald://inbox/connector')).toBe(true);
    await sub.close();
  });

  it("another caller's inbox is refused, naming the field; the caller's own is honored", async () => {
    const agent = await issuer.sign({ client_id: 'agent', sub: 'alice', scope: 'read', aud: url });
    const { client } = await connect('agent', agent);
    await expect(client.listen({ resourceSubscriptions: ['herald://inbox/connector'] })).rejects.toThrow(/notifications\.resourceSubscriptions: herald:\/\/inbox\/connector is not this caller's/);
    await expect(client.readResource({ uri: 'herald://inbox/connector' })).rejects.toThrow(/herald:\/\/inbox\/client\/agent/);
    const { client: connector } = await connect('connector', token);
    await expect(connector.listen({ resourceSubscriptions: ['herald://inbox/connector', 'herald://inbox/client/agent'] })).rejects.toThrow(/herald:\/\/inbox\/client\/agent is not this caller's/);
    const own = await client.listen({ resourceSubscriptions: ['herald://inbox/client/agent'] });
    expect(own.honoredFilter.resourceSubscriptions).toEqual(['herald://inbox/client/agent']);
    await own.close();
    // A token whose scopes do not give list_inbox neither sees nor hears its inbox.
    const scopeless = await issuer.sign({ client_id: 'agent', sub: 'alice', scope: 'none', aud: url });
    const { client: blind } = await connect('blind', scopeless);
    expect((await blind.listResources()).resources).toEqual([]);
    await expect(blind.listen({ resourceSubscriptions: ['herald://inbox/client/agent'] })).rejects.toThrow(/does not let this caller read its inbox/);
  });

  it("an OAuth client's stream ends when its token expires", async () => {
    const seconds = 3;
    const shortLived = await issuer.sign({ client_id: 'agent', sub: 'alice', scope: 'read', aud: url }, { expiresIn: Math.floor(Date.now() / 1000) + seconds });
    const { client } = await connect('short', shortLived);
    const sub = await client.listen({ resourceSubscriptions: ['herald://inbox/client/agent'] });
    const ended = await Promise.race([sub.closed, new Promise<'still open'>((resolve) => setTimeout(() => resolve('still open'), (seconds + 10) * 1000))]);
    expect(ended).not.toBe('still open');
  });
});
