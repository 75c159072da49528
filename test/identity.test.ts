import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from './support/client.js';
import { IDS, newRequestId, startTestHerald, TestClock, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

const PAIR_TAIL = "\n\nValid 10 minutes, single use. Enter it only in the `pair` tool of your agent's `herald mcp` or your connector's authorization page — never paste it anywhere else.";
const CODE = /^Your pairing code: \*\*([ABCDEFGHJKMNPQRSTVWXYZ23456789]{27})\*\*/;

// docs/protocol.md §7, through the sandbox's gateway and the real discord.js client.
describe('identity: /agent and pairing', () => {
  const clock = new TestClock();
  let h: TestHerald;
  let userSeq = 0;
  beforeAll(async () => {
    h = await startTestHerald({ clock });
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands to be registered');
  });
  afterAll(() => h.close());

  /** A new sandbox user with a unique id. */
  function newUser(globalName: string | null = 'Agent Owner', username = 'owner'): string {
    userSeq += 1;
    const id = `2${String(Date.now()).slice(-8)}${String(userSeq).padStart(9, '0')}`;
    h.sandbox.addUser({ id, username, global_name: globalName });
    return id;
  }
  const agent = async (userId: string, subcommand: string) => {
    const reply = await h.sandbox.invoke({ userId, guildId: IDS.guild, command: 'agent', subcommand });
    expect(reply.type).toBe(4);
    expect(reply.data?.flags).toBe(64);
    return reply.data?.content ?? '';
  };
  const pairCode = async (userId: string) => {
    const reply = await agent(userId, 'pair');
    const m = CODE.exec(reply);
    expect(m, reply).not.toBeNull();
    expect(reply).toBe(`Your pairing code: **${m?.[1]}**${PAIR_TAIL}`);
    return m?.[1] ?? '';
  };

  it('registers /agent and /destinations with Discord at start-up', () => {
    expect(h.sandbox.commands.map((c) => c.name).sort()).toEqual(['agent', 'destinations', 'media']);
    const agentCommand = h.sandbox.commands.find((c) => c.name === 'agent');
    expect(agentCommand?.options?.map((o) => o.name)).toEqual(['register', 'pair', 'unregister']);
  });

  it('register → pair → redeem → registration; unregister revokes; register again mints a new generation', async () => {
    const user = newUser();
    expect(await agent(user, 'pair')).toBe('Run `/agent register` first.');
    expect(await agent(user, 'register')).toBe('Registered. Run `/agent pair` to generate a pairing code for your agent.');
    expect(await agent(user, 'register')).toBe('Already registered — nothing changed.');
    const code = await pairCode(user);
    const redeemed = await h.bridge.post('/mcp/pair/redeem', { code });
    expect(redeemed.status).toBe(200);
    const { generation } = redeemed.json as { generation: string };
    // The protocol's keys first, in its order; then Herald's addition, the same id under the name every other operation uses.
    expect(redeemed.text).toBe(`{"discord_user_id":"${user}","generation":"${generation}","user_id":"${user}"}`);
    expect(generation).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const reg = await h.bridge.get(`/mcp/registration/${user}`);
    expect(reg.text).toBe(`{"generation":"${generation}"}`);
    // Single use.
    const again = await h.bridge.post('/mcp/pair/redeem', { code });
    expect(again.status).toBe(404);
    expect(again.text).toBe('{"error":"invalid or expired code"}');

    const unused = await pairCode(user);
    expect(await agent(user, 'unregister')).toBe("Unregistered: your agents' tokens and DMs are revoked.");
    expect(await agent(user, 'unregister')).toBe("You weren't registered.");
    expect((await h.bridge.post('/mcp/pair/redeem', { code: unused })).text).toBe('{"error":"invalid or expired code"}');
    const gone = await h.bridge.get(`/mcp/registration/${user}`);
    expect(gone.status).toBe(404);
    expect(gone.text).toBe('{"error":"not registered"}');
    const dm = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: dm, kind: 'dm', target: { user_id: user }, body: { content: 'hi' } });
    const failed = await h.waitForState(dm, 'failed');
    expect(failed['code']).toBe('RECIPIENT_UNREACHABLE');

    expect(await agent(user, 'register')).toBe('Registered. Run `/agent pair` to generate a pairing code for your agent.');
    const next = (await h.bridge.get(`/mcp/registration/${user}`)).json as { generation: string };
    expect(next.generation).not.toBe(generation);
  });

  it('keeps at most 5 live codes per user: a 6th drops the oldest', async () => {
    const user = newUser();
    await agent(user, 'register');
    const codes: string[] = [];
    for (let i = 0; i < 6; i++) codes.push(await pairCode(user));
    expect(new Set(codes).size).toBe(6);
    expect((await h.bridge.post('/mcp/pair/redeem', { code: codes[0] })).status).toBe(404);
    for (const code of codes.slice(1)) expect((await h.bridge.post('/mcp/pair/redeem', { code })).status).toBe(200);
  });

  it('expires codes after 10 minutes', async () => {
    const user = newUser();
    await agent(user, 'register');
    const fresh = await pairCode(user);
    const stale = await pairCode(user);
    clock.offsetMs += 9 * 60_000 + 50_000;
    expect((await h.bridge.post('/mcp/pair/redeem', { code: fresh })).status).toBe(200);
    clock.offsetMs += 20_000;
    expect((await h.bridge.post('/mcp/pair/redeem', { code: stale })).text).toBe('{"error":"invalid or expired code"}');
  });

  it('redeems a code exactly once under two concurrent redeems', async () => {
    const user = newUser();
    await agent(user, 'register');
    for (let round = 0; round < 5; round++) {
      const code = await pairCode(user);
      const results = await Promise.all([h.bridge.post('/mcp/pair/redeem', { code }), h.bridge.post('/mcp/pair/redeem', { code })]);
      expect(results.map((r) => r.status).sort()).toEqual([200, 404]);
    }
  });

  it('answers a malformed redeem with 400 malformed request', async () => {
    for (const raw of ['not json', '[]', '{}', '{"code":1}', '{"code":"abc"}', `{"code":"${'A'.repeat(26)}"}`, `{"code":"${'a'.repeat(27)}"}`, `{"code":"${'A'.repeat(26)}1"}`]) {
      const res = await h.bridge.call('POST', '/mcp/pair/redeem', { raw, headers: { 'content-type': 'application/json' } });
      expect(res.status, raw).toBe(400);
      expect(res.text).toBe('{"error":"malformed request"}');
    }
  });

  it('answers a malformed user_id with 404 not found', async () => {
    for (const bad of ['0123456789012345678', '1234', 'abc', '123456789012345678901']) {
      const res = await h.bridge.get(`/mcp/registration/${bad}`);
      expect(res.status).toBe(404);
      expect(res.text).toBe('{"error":"not found"}');
    }
  });

  it('answers an unknown subcommand', async () => {
    const user = newUser();
    expect(await agent(user, 'teleport')).toBe('Unknown subcommand. Use `/agent register`, `/agent pair` or `/agent unregister`.');
  });

  it('throttles failed redeems per address with 429, and still redeems a valid code', async () => {
    const user = newUser();
    await agent(user, 'register');
    const valid = await pairCode(user);
    let limited = 0;
    for (let i = 0; i < 12; i++) {
      const res = await h.bridge.post('/mcp/pair/redeem', { code: 'Z'.repeat(27) });
      if (res.status === 429) {
        limited += 1;
        expect(res.text).toBe('{"error":"too many failed attempts"}');
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      } else expect(res.status).toBe(404);
    }
    expect(limited).toBeGreaterThan(0);
    const ok = await h.bridge.post('/mcp/pair/redeem', { code: valid });
    expect(ok.status).toBe(200);
  });
});

describe('recipients', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands to be registered');
  });
  afterAll(() => h.close());

  it('lists registered users oldest first, at most 100, display names cut to 100 without splitting a surrogate pair', async () => {
    expect((await h.bridge.get('/mcp/recipients')).text).toBe('{"items":[]}');
    const ids: string[] = [];
    for (let i = 0; i < 101; i++) {
      const id = `3${String(i).padStart(17, '0')}`;
      ids.push(id);
      // 99 ASCII characters then an emoji: the 100th and 101st UTF-16 units are one character.
      const name = i === 0 ? `${'n'.repeat(99)}😀${'x'.repeat(50)}` : i === 1 ? null : `user ${i}`;
      h.sandbox.addUser({ id, username: `username${i}`, global_name: name });
      await h.sandbox.invoke({ userId: id, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    }
    const res = await h.bridge.get('/mcp/recipients');
    const items = (res.json as { items: { user_id: string; display_name: string }[] }).items;
    expect(items).toHaveLength(100);
    expect(items.map((i) => i.user_id)).toEqual(ids.slice(0, 100));
    expect(items[0]?.display_name).toBe('n'.repeat(99));
    expect(items[1]?.display_name).toBe('username1');
    expect(items[2]?.display_name).toBe('user 2');
  });

  it('needs the bridge token', async () => {
    expect((await call(h.url, 'GET', '/mcp/recipients')).status).toBe(401);
  });
});
