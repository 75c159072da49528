import type { Server as HttpServer } from 'node:http';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startHttp } from '../src/mcp/run.js';
import { storeRecords } from '../src/mcp/state.js';
import { createBridgeClient } from '../src/client/bridge-client.js';
import { POLICY_CLIENT_HEADER } from '../src/infra/http/policy.middleware.js';
import { createLogger } from '../src/infra/log.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { mcpOverHttp, toolText } from './support/mcp.js';
import { localIssuer, type LocalIssuer } from './support/oauth.js';

const POLICY = `
clients:
  confirming:
    confirm: [post_message]
`;

/**
 * Each OAuth client of `herald mcp --http` has its own records of what it sent (pairing, messages,
 * edit seqs, request_ids): another client's message is, to it, one it never sent. stdio and the
 * static token keep the connector's records as they were.
 */
describe('herald mcp --http: each OAuth client acts only on what it sent', { timeout: 180_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let issuer: LocalIssuer;
  let server: HttpServer;
  let url: string;
  const clients: Client[] = [];
  const staticToken = newToken();

  const connect = async (client: string, scope = 'read write admin'): Promise<Client> => {
    const c = await mcpOverHttp('records-test', url, client === 'static' ? staticToken : await issuer.sign({ client_id: client, sub: client, scope, aud: url }));
    clients.push(c);
    return c;
  };
  const call = async (c: Client, name: string, args: Record<string, unknown>): Promise<{ text: string; isError: boolean }> => {
    const r = await c.callTool({ name, arguments: args });
    return { text: toolText(r), isError: r.isError === true };
  };
  const requestIdOf = (text: string): string => /request_id: ([0-9a-f]{64})/.exec(text)?.[1] ?? '';
  const stateFile = (): string => path.join(dir, 'state.json');

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-records-'));
    const policyFile = path.join(dir, 'policy.yaml');
    await writeFile(policyFile, POLICY);
    issuer = await localIssuer();
    h = await startTestHerald({ env: { HERALD_POLICY: policyFile } });
    await h.mapDestination();
    const config = loadConfig({
      HERALD_URL: h.url,
      MCP_BRIDGE_TOKEN: h.bridgeToken,
      HERALD_MCP_STATE: stateFile(),
      HERALD_MCP_PORT: '0',
      HERALD_MCP_TOKEN: staticToken,
      HERALD_MCP_WAIT_MS: '15000',
      HERALD_MCP_OAUTH_ISSUER: issuer.url,
      HERALD_POLICY: policyFile,
    });
    ({ url, server } = await startHttp(config, h.bridgeToken, staticToken, createLogger('silent')));
  }, 180_000);
  afterAll(async () => {
    for (const c of clients) await c.close();
    server?.closeAllConnections();
    await new Promise<void>((resolve) => server?.close(() => resolve()));
    await issuer?.close();
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("another client can neither edit, react to, delete nor read a client's post, nor take its request_id over", async () => {
    const full = await connect('full');
    const other = await connect('other');
    const connector = await connect('static');
    const content = `records ${Date.now()}`;
    const post = { guild_id: IDS.guild, destination: 'alerts', content };
    const posted = await call(full, 'post_message', post);
    expect(posted.text).toMatch(/^Posted: /);
    const ref = requestIdOf(posted.text);
    const message = (): ReturnType<typeof h.sandbox.findMessage> => h.sandbox.channelMessages(IDS.channels.alerts).find((m) => m.content.startsWith(content));

    for (const who of [other, connector]) {
      const edit = await call(who, 'edit_message', { message_ref: ref, content: `${content} (taken over)` });
      expect(edit).toEqual({ isError: true, text: expect.stringContaining('This agent did not send a message with that request_id') as string });
      const del = await call(who, 'delete_message', { message_ref: ref });
      expect(del).toEqual({ isError: true, text: expect.stringContaining('This agent did not send a message with that request_id') as string });
    }
    // (The connector holds the bridge token: it may react to any message_ref, as through Herald's API.)
    const react = await call(other, 'react', { message_ref: ref, emoji: '👎' });
    expect(react).toEqual({ isError: true, text: expect.stringContaining('This agent did not send a message with that request_id') as string });
    // get_delivery answers another client's delivery exactly as one that does not exist.
    const unknown = await call(other, 'get_delivery', { request_id: 'e'.repeat(64) });
    expect(await call(other, 'get_delivery', { request_id: ref })).toEqual(unknown);
    expect(unknown).toEqual({ isError: true, text: 'No delivery with that request_id (records are kept 8 days).' });
    expect(await call(await connect('reader', 'read'), 'get_delivery', { request_id: ref })).toEqual(unknown);
    // The same post under the same request_id is not a replay another client may claim (and then edit).
    const replay = await call(other, 'post_message', { ...post, request_id: ref });
    expect(replay).toEqual({ isError: true, text: 'Nothing was sent: that request_id was used by another sender. Give a fresh one, or none.' });
    expect((await call(other, 'edit_message', { message_ref: ref, content: 'still not mine' })).isError).toBe(true);

    expect(message()?.content).toBe(content);
    expect(message()?.reactions ?? []).toEqual([]);
    expect(h.sandbox.deleted.filter((d) => d.id === message()?.id)).toEqual([]);

    // Its sender still can, its own replay included.
    expect((await call(full, 'get_delivery', { request_id: ref })).text).toMatch(/^Posted: /);
    expect((await call(full, 'post_message', { ...post, request_id: ref })).text).toMatch(/^Replayed/);
    expect((await call(full, 'edit_message', { message_ref: ref, content: `${content} v2` })).text).toMatch(/^Edited: /);
    expect((await call(full, 'react', { message_ref: ref, emoji: '👍' })).text).toMatch(/^Reacted: /);
    expect(message()?.content).toBe(`${content} v2`);
    expect(message()?.reactions).toEqual([{ emoji: '👍', users: [h.sandbox.bot.id] }]);

    // Kept apart in Herald's store, per caller (no file): the connector's, and each client's under its id.
    const seen = async (client: string | undefined): Promise<number> => (await fetch(`${h.url}/mcp/records/messages/${ref}`, { headers: { authorization: `Bearer ${h.bridgeToken}`, ...(client === undefined ? {} : { [POLICY_CLIENT_HEADER]: client }) } })).status;
    expect(await seen('full')).toBe(200);
    expect(await seen(undefined)).toBe(404);
    expect(await seen('other')).toBe(404);
    await expect(readFile(stateFile(), 'utf8')).rejects.toThrow(/ENOENT/);
  });

  it("a pairing is its client's: another client (or the static token) has none, and cannot DM", async () => {
    const pairer = await connect('pairer');
    const other = await connect('other-pairer');
    const connector = await connect('static');
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    const reply = await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'pair' });
    const code = /\*\*([A-Z2-9]{27})\*\*/.exec(reply.data?.content ?? '')?.[1] ?? '';
    expect((await call(pairer, 'pair', { code })).text).toBe(`Paired with Discord user ${IDS.user}. send_dm now reaches them.`);
    const dm = `records dm ${Date.now()}`;
    for (const who of [other, connector]) expect(await call(who, 'send_dm', { content: dm })).toEqual({ isError: true, text: expect.stringContaining('Not paired with anyone yet') as string });
    expect(h.sandbox.allMessages().filter((m) => m.content === dm)).toHaveLength(0);
    expect((await call(pairer, 'send_dm', { content: dm })).text).toMatch(/^DM sent: /);
    expect(h.sandbox.allMessages().filter((m) => m.content === dm)).toHaveLength(1);
  });

  it('a confirmed call is recorded as its caller\'s: it can edit what it posted, the connector cannot', async () => {
    const confirming = await connect('confirming');
    const args = { guild_id: IDS.guild, destination: 'alerts', content: `records confirmed ${Date.now()}` };
    const first = await call(confirming, 'post_message', args);
    const confirmToken = /confirm_token: "([^"]+)"/.exec(first.text)?.[1] ?? '';
    const posted = await call(confirming, 'post_message', { ...args, confirm_token: confirmToken });
    expect(posted.text).toMatch(/^Posted: /);
    const ref = requestIdOf(posted.text);
    expect((await call(await connect('static'), 'edit_message', { message_ref: ref, content: 'the connector' })).isError).toBe(true);
    expect((await call(confirming, 'edit_message', { message_ref: ref, content: `${args.content} v2` })).text).toMatch(/^Edited: /);
  });

  it("keeps a client's records in Herald, whatever its id (`__proto__` is only a name)", async () => {
    const ref = 'a'.repeat(64);
    const bridgeOf = (client: string | undefined): ReturnType<typeof createBridgeClient> => createBridgeClient({ baseUrl: h.url, token: h.bridgeToken, headers: client === undefined ? {} : { [POLICY_CLIENT_HEADER]: client } });
    await storeRecords(bridgeOf('__proto__'), 'client').rememberMessage(ref, 'post');
    // Another process (a restart, another replica) reads the same.
    expect(await storeRecords(bridgeOf('__proto__'), 'client').message(ref)).toMatchObject({ kind: 'post', seq: 0 });
    expect(await storeRecords(bridgeOf(undefined), 'connector').message(ref)).toBeUndefined();
    expect(await storeRecords(bridgeOf('constructor'), 'client').owns(ref)).toBe(false);
    expect(Object.keys(Object.prototype)).toEqual([]);
  });
});
