import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POLICY_CLIENT_HEADER } from '../src/infra/http/policy.middleware.js';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { mcpOverStdio, toolText } from './support/mcp.js';
import { waitFor } from './support/wait.js';

// The pairing kept in Herald and the per-principal rate caps, as a hostile caller meets them: an
// agent with or without a token, a client id `herald mcp` names to Herald, two callers racing for
// one code, and a user who revoked and registered again.
const POLICY = `
connector:
  rate:
    post_message: { per_minute: 1 }
clients:
  listed:
    destinations: [alerts]
`;

describe('pairing and rate caps under attack', { timeout: 120_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let userSeq = 0;

  const as = (client: string): { headers: Record<string, string> } => ({ headers: { [POLICY_CLIENT_HEADER]: client } });
  const agent = async (userId: string, subcommand: string): Promise<string> =>
    (await h.sandbox.invoke({ userId, guildId: IDS.guild, command: 'agent', subcommand })).data?.content ?? '';
  const code = async (userId: string): Promise<string> => /\*\*([A-Z2-9]{27})\*\*/.exec(await agent(userId, 'pair'))?.[1] ?? '';
  /** A new registered sandbox user. */
  const registered = async (): Promise<string> => {
    userSeq += 1;
    const id = `3${String(Date.now()).slice(-8)}${String(userSeq).padStart(9, '0')}`;
    h.sandbox.addUser({ id, username: `u${userSeq}`, global_name: null });
    await agent(id, 'register');
    return id;
  };
  const raw = (pathName: string, init: RequestInit = {}): Promise<Response> => fetch(`${h.url}${pathName}`, init);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-attack-'));
    const file = path.join(dir, 'policy.yaml');
    await writeFile(file, POLICY);
    h = await startTestHerald({ env: { HERALD_POLICY: file } });
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
    await h.mapDestination('alerts', IDS.channels.alerts);
  });
  afterAll(async () => {
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('no token, a wrong one or the admin token neither redeems a code nor reads a pairing, whatever client it names', async () => {
    const user = await registered();
    const valid = await code(user);
    for (const token of [undefined, 'x'.repeat(43), h.adminToken]) {
      const headers: Record<string, string> = { 'content-type': 'application/json', [POLICY_CLIENT_HEADER]: 'victim' };
      if (token !== undefined) headers['authorization'] = `Bearer ${token}`;
      expect((await raw('/mcp/pair/redeem', { method: 'POST', headers, body: JSON.stringify({ code: valid }) })).status).toBe(401);
      expect((await raw('/mcp/pairing', { headers })).status).toBe(401);
    }
    // The code was not used up by any of them.
    expect((await h.bridge.post('/mcp/pair/redeem', { code: valid }, as('owner-of-code'))).status).toBe(200);
    expect((await h.bridge.get('/mcp/pairing', as('victim'))).status).toBe(404);
  });

  it("one principal's redeem neither reads nor overwrites another's pairing", async () => {
    const [first, second] = [await registered(), await registered()];
    expect((await h.bridge.post('/mcp/pair/redeem', { code: await code(first) }, as('alice'))).status).toBe(200);
    expect((await h.bridge.post('/mcp/pair/redeem', { code: await code(second) }, as('bob'))).status).toBe(200);
    expect(((await h.bridge.get('/mcp/pairing', as('alice'))).json as { user_id: string }).user_id).toBe(first);
    expect(((await h.bridge.get('/mcp/pairing', as('bob'))).json as { user_id: string }).user_id).toBe(second);
    // Names that look alike are other principals: case, a prefix, the connector's own name.
    for (const other of ['Alice', 'alic', 'client:alice', 'connector']) expect((await h.bridge.get('/mcp/pairing', as(other))).status, other).toBe(404);
  });

  it('one code redeemed at once by two principals pairs exactly one of them', async () => {
    const user = await registered();
    for (let round = 0; round < 4; round++) {
      const once = await code(user);
      const [a, b] = [`race-a-${round}`, `race-b-${round}`];
      const results = await Promise.all([h.bridge.post('/mcp/pair/redeem', { code: once }, as(a)), h.bridge.post('/mcp/pair/redeem', { code: once }, as(b))]);
      expect(results.map((r) => r.status).toSorted()).toEqual([200, 404]);
      const paired = await Promise.all([a, b].map(async (p) => (await h.bridge.get('/mcp/pairing', as(p))).status));
      // toSorted, not sort: sort() reorders paired itself and the winner check below would read the sorted copy.
      expect(paired.toSorted()).toEqual([200, 404]);
      // The winner is the one that got 200.
      expect(paired[results[0]?.status === 200 ? 0 : 1]).toBe(200);
    }
  });

  it('a client id too long for the store’s keys (a URL an issuer minted) is still a principal of its own, never a 500', async () => {
    const user = await registered();
    const once = await code(user);
    // Random, so the store cannot compress it under its index's limit (about 2.7 kB a key).
    const long = `https://agent.example/${randomBytes(3000).toString('hex')}`;
    const redeemed = await h.bridge.post('/mcp/pair/redeem', { code: once }, as(long));
    expect(redeemed.status).not.toBe(500);
    const pairing = await h.bridge.get('/mcp/pairing', as(long));
    expect(pairing.status).not.toBe(500);
    const sent = await h.bridge.post('/mcp/deliveries', post(newRequestId()), as(long));
    expect(sent.status).not.toBe(500);
    expect((await h.bridge.post('/mcp/inbox/ack', { cursor: '0' }, as(long))).status).toBe(200);
    const upload = await h.bridge.call('POST', '/mcp/files?filename=f.bin', { raw: randomBytes(64), headers: { 'content-type': 'application/octet-stream', [POLICY_CLIENT_HEADER]: long } });
    expect(upload.status).toBe(201);
    // Paired, as a principal of its own: another long id (same start) is not it, nor is the connector.
    expect(redeemed.status).toBe(200);
    expect(((await h.bridge.get('/mcp/pairing', as(long))).json as { user_id: string }).user_id).toBe(user);
    expect((await h.bridge.get('/mcp/pairing', as(`${long}x`))).status).toBe(404);
    expect((await h.bridge.get('/mcp/pairing')).status).toBe(404);
  });

  it('each principal has its own count under a cap: a client neither uses up the connector’s count nor another client’s', async () => {
    expect((await h.bridge.post('/mcp/deliveries', post(newRequestId()), as('listed'))).status).toBe(202);
    expect((await h.bridge.post('/mcp/deliveries', post(newRequestId()), as('listed'))).status).toBe(429);
    expect((await h.bridge.post('/mcp/deliveries', post(newRequestId()))).status).toBe(202);
    expect((await h.bridge.post('/mcp/deliveries', post(newRequestId()))).status).toBe(429);
    expect((await h.bridge.post('/mcp/deliveries', post(newRequestId()), as('unlisted-1'))).status).toBe(202);
    expect((await h.bridge.post('/mcp/deliveries', post(newRequestId()), as('unlisted-1'))).status).toBe(429);
    // A listed client's own rules still hold beside the connector's.
    expect((await h.bridge.post('/mcp/deliveries', post(newRequestId(), 'x', 'ops'), as('listed'))).status).toBe(403);
  });

  // Last: it leaves this address throttled for failed redeems.
  it('failed redeems are throttled by the connecting address, whatever X-Forwarded-For or client id they carry; a valid code still passes', async () => {
    const user = await registered();
    const valid = await code(user);
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const headers = { [POLICY_CLIENT_HEADER]: `guesser-${i}`, 'x-forwarded-for': `203.0.113.${i}`, 'x-real-ip': `203.0.113.${i}` };
      statuses.push((await h.bridge.post('/mcp/pair/redeem', { code: 'A'.repeat(27) }, { headers })).status);
    }
    // Earlier tests' lost races counted too: some 404s, then nothing but 429 from this one address.
    const refused = statuses.indexOf(429);
    expect(refused).toBeGreaterThan(0);
    expect(refused).toBeLessThanOrEqual(10);
    expect(statuses).toEqual([...Array(refused).fill(404), ...Array(12 - refused).fill(429)]);
    expect((await h.bridge.post('/mcp/pair/redeem', { code: valid }, as('patient'))).status).toBe(200);
  });

  describe('herald mcp after the paired user revoked', () => {
    let stdio: Client;
    beforeAll(async () => {
      stdio = await mcpOverStdio('herald-attack', { HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_WAIT_MS: '15000', HERALD_MCP_STATE: path.join(dir, 'mcp-state.json') });
    });
    afterAll(async () => {
      await stdio?.close();
    });

    it('react in the DM by message_id alone is refused, as send_dm is, once the user unregistered and registered again', async () => {
      const user = await registered();
      expect(toolText(await stdio.callTool({ name: 'pair', arguments: { code: await code(user) } }))).toContain('Paired with Discord user');
      const content = `before revoking ${Date.now()}`;
      expect(toolText(await stdio.callTool({ name: 'send_dm', arguments: { content } }))).toMatch(/^DM sent: /);
      const dm = h.sandbox.allMessages().find((m) => m.content === content);
      expect(dm).toBeDefined();
      await agent(user, 'unregister');
      await agent(user, 'register');
      const refused = await stdio.callTool({ name: 'send_dm', arguments: { content: 'after revoking' } });
      expect(refused.isError).toBe(true);
      const reacted = await stdio.callTool({ name: 'react', arguments: { message_id: dm?.id, emoji: '👍' } });
      expect(toolText(reacted)).toContain('registered again since pairing');
      expect(reacted.isError).toBe(true);
      expect(h.sandbox.allMessages().find((m) => m.id === dm?.id)?.reactions ?? []).toEqual([]);
    });
  });
});
