import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, newRequestId, type TestHerald } from './support/herald.js';
import { startTwoBots, type TwoBots } from './support/two-bots.js';

/**
 * Registrations, pairing codes and pairings are per bot (docs/guides/identities.md): a person
 * registers with each bot that may reach them, through that bot's own `/agent`, and an agent
 * speaking as a bot lists, pairs with and DMs only the people registered with it. Black-box over
 * HTTP, two bots in the Discord sandbox, two agents bound to them by the operator's policy.
 */
const POLICY = `
clients:
  agent-ops: { identity: ops }
  agent-main: { identity: default }
`;

describe('registrations per bot', { timeout: 120_000 }, () => {
  let bots: TwoBots;
  let h: TestHerald;
  let sandbox: DiscordSandbox;
  let ops: { id: string; token: string };
  const as = (client: string) => bots.as(client);
  const dmsFrom = (botId: string, content: string) => [...sandbox.messages.values()].flat().filter((m) => m.content === content && m.author.id === botId);
  const agent = (subcommand: string, botId?: string) => sandbox.invoke({ userId: IDS.user, command: 'agent', subcommand, ...(botId !== undefined ? { botId } : {}) });
  const dm = async (client: string, content: string, id = newRequestId()): Promise<Record<string, unknown>> => {
    expect((await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'dm', target: { user_id: IDS.user }, body: { content } }, as(client))).status).toBe(202);
    return settled(client, id);
  };
  const settled = (client: string, id: string): Promise<Record<string, unknown>> => bots.settled(id, client);
  const recipients = async (client: string) => ((await h.bridge.get('/mcp/recipients', as(client))).json as { items: { user_id: string }[] }).items.map((r) => r.user_id);

  beforeAll(async () => {
    // Both bots on the gateway, each with its commands: the ops bot with /agent only.
    bots = await startTwoBots(POLICY);
    ({ h, sandbox, ops } = bots);
  });
  afterAll(() => bots?.close());

  it('gives another bot /agent only: the rest of Herald’s commands are the default bot’s', () => {
    expect(sandbox.commandsOf(ops.id).map((c) => c.name)).toEqual(['agent']);
    expect(sandbox.commands.map((c) => c.name)).toContain('destinations');
  });

  it('a person registered with the default bot only is not reachable by the ops agent; registering with the ops bot makes them so', async () => {
    expect((await agent('register')).data?.content).toMatch(/^Registered\./);
    expect(await recipients('agent-main')).toEqual([IDS.user]);
    expect(await recipients('agent-ops')).toEqual([]);
    expect((await h.bridge.get(`/mcp/registration/${IDS.user}`, as('agent-ops'))).status).toBe(404);
    expect(await dm('agent-ops', 'ops, before registering')).toMatchObject({ state: 'failed', code: 'RECIPIENT_UNREACHABLE' });
    expect(dmsFrom(ops.id, 'ops, before registering')).toHaveLength(0);

    // The person registers with the ops bot, on the ops bot.
    expect((await agent('register', ops.id)).data?.content).toMatch(/^Registered\./);
    expect((await agent('register', ops.id)).data?.content).toBe('Already registered — nothing changed.');
    expect(await recipients('agent-ops')).toEqual([IDS.user]);
    expect(await dm('agent-ops', 'ops, after registering')).toMatchObject({ state: 'delivered' });
    expect(dmsFrom(ops.id, 'ops, after registering')).toHaveLength(1);
    expect(await dm('agent-main', 'main, as before')).toMatchObject({ state: 'delivered' });
    expect(dmsFrom(sandbox.bot.id, 'main, as before')).toHaveLength(1);
    // Each bot has its own DM channel with the person, as on Discord.
    expect(dmsFrom(ops.id, 'ops, after registering')[0]?.channel_id).not.toBe(dmsFrom(sandbox.bot.id, 'main, as before')[0]?.channel_id);
  });

  it('a pairing code is its bot’s: the other bot’s agent cannot redeem it (404, and the code stays usable)', async () => {
    const codeOf = async (botId?: string) => /\*\*([A-Z2-9]{27})\*\*/.exec((await agent('pair', botId)).data?.content ?? '')?.[1];
    // The main agent pairs with the person through Herald's own bot first.
    await agent('register');
    const mainPairing = await h.bridge.post('/mcp/pair/redeem', { code: await codeOf() }, as('agent-main'));
    expect(mainPairing.status).toBe(200);
    await agent('register', ops.id);
    const code = await codeOf(ops.id);
    expect(code).toBeDefined();
    expect((await h.bridge.post('/mcp/pair/redeem', { code }, as('agent-main'))).status).toBe(404);
    // Its pairing is the one it made, untouched by the refused code.
    expect((await h.bridge.get('/mcp/pairing', as('agent-main'))).json).toMatchObject({ user_id: IDS.user, generation: (mainPairing.json as { generation: string }).generation });
    const redeemed = await h.bridge.post('/mcp/pair/redeem', { code }, as('agent-ops'));
    expect(redeemed.status).toBe(200);
    expect(redeemed.json).toMatchObject({ user_id: IDS.user });
    expect((await h.bridge.get('/mcp/pairing', as('agent-ops'))).json).toMatchObject({ user_id: IDS.user });
    // Used once.
    expect((await h.bridge.post('/mcp/pair/redeem', { code }, as('agent-ops'))).status).toBe(404);
  });

  it('answers /agent pair on the ops bot by its own registration: registered with the default bot only is not enough', async () => {
    await agent('register');
    await agent('unregister', ops.id);
    expect((await agent('pair', ops.id)).data?.content).toBe('Run `/agent register` first.');
    expect((await agent('pair')).data?.content).toMatch(/^Your pairing code: \*\*[A-Z2-9]{27}\*\*/);
  });

  it('unregistering from the default bot leaves the registration with the ops bot', async () => {
    await agent('register');
    await agent('register', ops.id);
    expect((await agent('unregister')).data?.content).toBe("Unregistered: your agents' tokens and DMs are revoked.");
    expect(await recipients('agent-main')).toEqual([]);
    expect(await recipients('agent-ops')).toEqual([IDS.user]);
    expect(await dm('agent-ops', 'ops, after the default unregister')).toMatchObject({ state: 'delivered' });
    expect(await dm('agent-main', 'main, after the default unregister')).toMatchObject({ state: 'failed', code: 'RECIPIENT_UNREACHABLE' });
  });

  it('unregistering from the ops bot cuts only the ops agent off', async () => {
    await agent('register');
    await agent('register', ops.id);
    const earlier = newRequestId();
    expect(await dm('agent-ops', 'ops, before unregistering', earlier)).toMatchObject({ state: 'delivered' });
    expect((await agent('unregister', ops.id)).data?.content).toBe("Unregistered: your agents' tokens and DMs are revoked.");
    // Nothing more goes into the conversation: no reaction on the earlier DM; taking it away stays allowed.
    const act = async (kind: 'reaction' | 'delete') => {
      const id = newRequestId();
      const body = kind === 'reaction' ? { emoji: '👍' } : {};
      expect((await h.bridge.post('/mcp/deliveries', { request_id: id, kind, target: { message_ref: earlier }, body }, as('agent-ops'))).status).toBe(202);
      return settled('agent-ops', id);
    };
    expect(await act('reaction')).toMatchObject({ state: 'failed', code: 'RECIPIENT_UNREACHABLE' });
    expect(dmsFrom(ops.id, 'ops, before unregistering')[0]?.reactions ?? []).toEqual([]);
    expect(await act('delete')).toMatchObject({ state: 'delivered' });
    expect(dmsFrom(ops.id, 'ops, before unregistering')).toHaveLength(0);
    expect(await dm('agent-ops', 'ops, after unregistering')).toMatchObject({ state: 'failed', code: 'RECIPIENT_UNREACHABLE' });
    expect(dmsFrom(ops.id, 'ops, after unregistering')).toHaveLength(0);
    expect(await recipients('agent-ops')).toEqual([]);
    expect((await h.bridge.get('/mcp/pairing', as('agent-ops'))).status).toBe(200);
    expect(await dm('agent-main', 'main, still')).toMatchObject({ state: 'delivered' });
    expect(await recipients('agent-main')).toEqual([IDS.user]);
  });

  it('counts each bot apart in the metrics and shows it on the status page', async () => {
    await agent('register', ops.id);
    expect(await dm('agent-ops', 'ops, counted')).toMatchObject({ state: 'delivered' });
    const stranger = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: stranger, kind: 'dm', target: { user_id: '999999999999999999' }, body: { content: 'to no one' } }, as('agent-ops'));
    expect(await settled('agent-ops', stranger)).toMatchObject({ state: 'failed', code: 'RECIPIENT_UNREACHABLE' });
    const scrape = await (await fetch(`${h.herald.metricsUrl ?? ''}/metrics`)).text();
    const sum = (name: string, ...labels: string[]) =>
      scrape
        .split('\n')
        .filter((l) => l.startsWith(`${name}{`) && labels.every((x) => l.includes(x)))
        .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
    expect(sum('herald_deliveries_finished_total', 'kind="dm"', 'outcome="delivered"', 'identity="ops"')).toBeGreaterThanOrEqual(1);
    expect(sum('herald_deliveries_finished_total', 'kind="dm"', 'outcome="failed"', 'identity="ops"')).toBeGreaterThanOrEqual(1);
    // Discord's answers to each bot's requests, apart: the ops bot's own, and Herald's bot's.
    expect(sum('herald_platform_responses_total', 'transport="discord"', 'identity="ops"')).toBeGreaterThan(0);
    expect(sum('herald_platform_responses_total', 'transport="discord"', 'identity="default"')).toBeGreaterThan(0);
    const page = await (await fetch(`${h.herald.metricsUrl ?? ''}/`)).text();
    expect(page).toContain('As ops: delivered per minute');
  });
});
