import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBridgeClient } from '../src/client/bridge-client.js';
import { createLogger } from '../src/infra/log.js';
import { createMcpServer } from '../src/mcp/server.js';
import { storeRecords } from '../src/mcp/state.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { callTool, mcpClient } from './support/mcp.js';

// Names an agent or an operator's request gives that match a name's pattern but are special in a
// JavaScript object (constructor, toString, __proto__, …): every operation naming a platform, a
// destination or a command answers them as any unknown name, with a 4xx naming the field.

const SPECIAL = ['constructor', 'toString', 'hasOwnProperty', 'valueOf', '__proto__', 'prototype', 'isPrototypeOf'];
const CHAT_TRANSPORT = 'transport must be one of irc, discord, memory, slack';

describe('names special in JavaScript objects', { timeout: 120_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let agent: Client;
  const raw = async (method: string, p: string, token: string, body?: string): Promise<{ status: number; json: unknown }> => {
    const r = await fetch(h.url + p, { method, headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, ...(body !== undefined ? { body } : {}) });
    return { status: r.status, json: await r.json() };
  };

  beforeAll(async () => {
    h = await startTestHerald({ env: { HERALD_DISCORD_CHAT_GUILD: IDS.guild } });
    dir = await mkdtemp(path.join(tmpdir(), 'herald-special-'));
    const server = createMcpServer({ bridge: createBridgeClient({ baseUrl: h.url, token: h.bridgeToken }), state: storeRecords(createBridgeClient({ baseUrl: h.url, token: h.bridgeToken }), 'connector'), waitMs: 1_000, log: createLogger('silent') });
    const [a, b] = InMemoryTransport.createLinkedPair();
    await server.connect(a);
    agent = await mcpClient('special-names', b);
  });
  afterAll(async () => {
    await agent?.close();
    await h?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('as a chat transport, over HTTP (query and body) and through the chat tools', async () => {
    for (const t of SPECIAL) {
      // A name of the contract's shape that no platform has is refused by the chat service, with the
      // list; one of another shape (__proto__) by the contract's pattern.
      const error = /^[a-z][a-z0-9_-]{0,31}$/.test(t) ? CHAT_TRANSPORT : 'transport must be a platform name such as irc or discord';
      expect(await raw('GET', `/mcp/chat/channels?transport=${t}`, h.bridgeToken)).toEqual({ status: 400, json: { error } });
      expect(await raw('GET', `/mcp/chat/messages?channel=alerts&transport=${t}`, h.bridgeToken)).toEqual({ status: 400, json: { error } });
      expect(await raw('POST', '/mcp/chat/messages', h.bridgeToken, `{"channel":"#alerts","text":"x","sender":"ada","transport":"${t}"}`)).toEqual({ status: 400, json: { error } });
      const tool = await callTool(agent, 'list_channels', { transport: t });
      expect(tool.isError).toBe(true);
      expect(tool.text).toContain('Invalid arguments');
    }
  });

  it('as a destination mapping transport (DestinationTransport) and as a destination', async () => {
    for (const t of SPECIAL) {
      const r = await raw('PUT', `/admin/destinations/${IDS.guild}/alerts`, h.adminToken, `{"transport":"${t}","channel":"alerts"}`);
      expect(r.status).toBe(400);
      expect(['transport must be one of discord (the platforms this Herald runs)', 'transport must be a platform name such as discord or irc']).toContain((r.json as { error: string }).error);
      expect(await raw('PUT', `/admin/destinations/${IDS.guild}/${t}`, h.adminToken, `{"channel_id":"${IDS.channels.alerts}"}`)).toEqual({ status: 400, json: { error: 'destination must be one of alerts, deals, digest, ops' } });
    }
    // A body's own __proto__ key is a key like any other: no mapping to another platform comes of it.
    const own = await raw('PUT', `/admin/destinations/${IDS.guild}/alerts`, h.adminToken, `{"__proto__":{"transport":"irc"},"channel_id":"${IDS.channels.alerts}"}`);
    expect(own.json).not.toHaveProperty('irc_channel');
    expect(own.json).not.toHaveProperty('transport');
  });

  it('as a command name, and as a delivery kind (the policy picks its tool by kind)', async () => {
    for (const t of SPECIAL) {
      expect((await raw('GET', `/mcp/commands/${t}`, h.bridgeToken)).status).toBeOneOf([400, 404]);
      expect((await raw('POST', '/mcp/deliveries', h.bridgeToken, `{"kind":"${t}","request_id":"${'a'.repeat(64)}"}`)).status).toBe(400);
    }
  });
});
