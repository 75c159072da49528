import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, newRequestId, post, type TestHerald } from './support/herald.js';
import { startTwoBots, type TwoBots } from './support/two-bots.js';
import { waitFor } from './support/wait.js';

// Attacks on identities (HERALD_DISCORD_IDENTITIES + the policy's identity rule), black-box over
// HTTP against the Discord sandbox: an agent bound to one bot reading or acting as another.
const POLICY = `
clients:
  agent-ops: { identity: ops }
  agent-main: { identity: default }
`;

describe('attack: identities across bots', { timeout: 180_000 }, () => {
  let bots: TwoBots;
  let h: TestHerald;
  let sandbox: DiscordSandbox;
  let ops: { id: string; token: string };
  const as = (client: string) => bots.as(client);
  const messages = (content: string) => [...sandbox.messages.values()].flat().filter((m) => m.content === content);
  const settled = (requestId: string, client: string, timeoutMs?: number): Promise<Record<string, unknown>> => bots.settled(requestId, client, timeoutMs);

  beforeAll(async () => {
    // HERALD_NONCE_WINDOW_MS=0: a delivery in doubt is settled by reading channel history (delivery.reconcile.ts).
    bots = await startTwoBots(POLICY, { env: { HERALD_NONCE_WINDOW_MS: '0' } });
    ({ h, sandbox, ops } = bots);
  });
  afterAll(() => bots?.close());

  it("shows a delivery's detail (GET /admin/deliveries/{id}) to a bridge caller of its own identity only", async () => {
    const mine = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(mine, 'ops secret-ish post'), as('agent-ops'))).status).toBe(202);
    expect(await settled(mine, 'agent-ops')).toMatchObject({ state: 'delivered' });
    // The documented isolation: another identity's delivery is not found.
    expect((await h.bridge.get(`/mcp/deliveries/${mine}`, as('agent-main'))).status).toBe(404);
    // The ops agent itself may not read its own detail (refused by policy: identity) ...
    expect((await h.bridge.get(`/admin/deliveries/${mine}`, as('agent-ops'))).status).toBe(403);
    // ... nor may the default-bound agent or the bare connector read where it went, its ids, state and reason.
    const main = await h.bridge.get(`/admin/deliveries/${mine}`, as('agent-main'));
    const connector = await h.bridge.get(`/admin/deliveries/${mine}`);
    // Answered as an id nobody sent: nothing tells it apart from one.
    expect({ main: main.status, connector: connector.status, body: main.json }).toEqual({ main: 404, connector: 404, body: { error: 'unknown request_id' } });
    expect((await h.bridge.get(`/admin/deliveries/${'0'.repeat(64)}`, as('agent-main'))).json).toEqual(main.json);
    // The operator (admin token) sees every identity's.
    expect((await h.admin.get(`/admin/deliveries/${mine}`)).status).toBe(200);
  });

  it('held: two identities racing on one request_id: exactly one is accepted, the other is a reuse (422), one message from the winner’s bot', async () => {
    for (let round = 0; round < 8; round++) {
      const id = newRequestId();
      const content = `race ${round} ${id.slice(0, 6)}`;
      const [a, b] = await Promise.all([h.bridge.post('/mcp/deliveries', post(id, content), as('agent-ops')), h.bridge.post('/mcp/deliveries', post(id, content), as('agent-main'))]);
      expect([a.status, b.status].sort(), `round ${round}`).toEqual([202, 422]);
      const winner = a.status === 202 ? 'agent-ops' : 'agent-main';
      const loser = winner === 'agent-ops' ? 'agent-main' : 'agent-ops';
      expect(await settled(id, winner)).toMatchObject({ state: 'delivered' });
      expect((await h.bridge.get(`/mcp/deliveries/${id}`, as(loser))).status).toBe(404);
      expect(messages(content).map((m) => m.author.id)).toEqual([winner === 'agent-ops' ? ops.id : sandbox.bot.id]);
      // The loser's replay is still a reuse, never the winner's delivery.
      expect((await h.bridge.post('/mcp/deliveries', post(id, content), as(loser))).status).toBe(422);
    }
  });

  it("held: a reaction by {guild_id, destination, message_id} on the default bot's message is the ops bot's own; its remove takes off only its own", async () => {
    const original = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(original, 'main says, react to me'), as('agent-main'));
    await settled(original, 'agent-main');
    const [message] = messages('main says, react to me');
    expect(message?.author.id).toBe(sandbox.bot.id);
    const react = async (client: string, target: Record<string, unknown>, body: Record<string, unknown>) => {
      const id = newRequestId();
      expect((await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'reaction', target, body }, as(client))).status).toBe(202);
      return settled(id, client);
    };
    expect(await react('agent-main', { message_ref: original }, { emoji: '👍' })).toMatchObject({ state: 'delivered' });
    const byId = { guild_id: IDS.guild, destination: 'alerts', message_id: message?.id };
    // The ops agent cannot take off the default bot's reaction: Discord's own-reaction route is the ops bot's.
    expect(await react('agent-ops', byId, { emoji: '👍', remove: true })).toMatchObject({ state: 'delivered' });
    expect(await react('agent-ops', byId, { emoji: '👎' })).toMatchObject({ state: 'delivered' });
    const reactions = messages('main says, react to me')[0]?.reactions ?? [];
    expect(reactions).toEqual([
      { emoji: '👍', users: [sandbox.bot.id] },
      { emoji: '👎', users: [ops.id] },
    ]);
  });

  it('held: an ops-bound DM goes out from the ops bot, a default-bound one from Herald’s own; neither may delete the other’s', async () => {
    await waitFor(async () => ((await (await fetch(`${h.url}/readyz`)).json()) as { checks?: Record<string, string> }).checks?.['gateway'] === 'ok' || undefined, 'the default gateway');
    await sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    // Registered with each bot, on that bot: a registration with one reaches only that bot's agents.
    await waitFor(() => sandbox.commandsOf(ops.id).length > 0 || undefined, 'the ops bot’s /agent');
    await sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register', botId: ops.id });
    const dm = (id: string, content: string) => ({ request_id: id, kind: 'dm', target: { user_id: IDS.user }, body: { content } });
    const fromOps = newRequestId();
    const fromMain = newRequestId();
    await h.bridge.post('/mcp/deliveries', dm(fromOps, 'dm from ops'), as('agent-ops'));
    await h.bridge.post('/mcp/deliveries', dm(fromMain, 'dm from main'), as('agent-main'));
    expect(await settled(fromOps, 'agent-ops')).toMatchObject({ state: 'delivered' });
    expect(await settled(fromMain, 'agent-main')).toMatchObject({ state: 'delivered' });
    expect(messages('dm from ops').map((m) => m.author.id)).toEqual([ops.id]);
    expect(messages('dm from main').map((m) => m.author.id)).toEqual([sandbox.bot.id]);
    for (const [client, ref] of [
      ['agent-ops', fromMain],
      ['agent-main', fromOps],
    ] as const) {
      const id = newRequestId();
      await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'delete', target: { message_ref: ref }, body: {} }, as(client));
      expect(await settled(id, client)).toMatchObject({ state: 'failed', code: 'NOT_FOUND' });
    }
    expect(messages('dm from ops')).toHaveLength(1);
    expect(messages('dm from main')).toHaveLength(1);
  });

  it('held (flaky network): an ops post whose answer is lost is settled from the ops bot’s history, once, never re-sent as another bot, even with a default-bound twin', async () => {
    const content = 'in doubt as ops';
    sandbox.inject({ method: 'POST', path: `^/channels/${IDS.channels.alerts}/messages$`, action: 'drop_after_create' });
    const doubtful = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(doubtful, content), as('agent-ops'));
    await waitFor(() => messages(content).length === 1 || undefined, 'the dropped create');
    // The same content from the default bot's agent, to the same channel, while the ops one is in doubt.
    const twin = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(twin, content), as('agent-main'));
    expect(await settled(doubtful, 'agent-ops', 90_000)).toMatchObject({ state: 'delivered' });
    expect(await settled(twin, 'agent-main', 90_000)).toMatchObject({ state: 'delivered' });
    expect(messages(content).map((m) => m.author.id).sort()).toEqual([ops.id, sandbox.bot.id].sort());
    const url = (await h.bridge.get(`/mcp/deliveries/${doubtful}`, as('agent-ops'))).json as { url: string };
    const opsMessage = messages(content).find((m) => m.author.id === ops.id);
    expect(url.url.endsWith(`/${opsMessage?.id ?? 'none'}`)).toBe(true);
  });
});
