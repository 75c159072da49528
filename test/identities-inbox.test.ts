import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, newRequestId, type TestHerald } from './support/herald.js';
import { startTwoBots, type TwoBots } from './support/two-bots.js';
import { waitFor } from './support/wait.js';

/**
 * The inbox is per bot for DMs (docs/guides/identities.md): a DM a person writes to a bot, and
 * their reactions there, are heard by that bot's session and read only by agents speaking as it.
 * Black-box over HTTP, two bots in the Discord sandbox, two agents bound to them by the guide's own
 * policy (an OAuth client reads DMs only where the policy grants it a DM tool: the guide's do).
 */

/** The guide's own policy (its `agents.yaml`), so the walkthrough's agents are the ones proven here. */
async function guidePolicy(): Promise<string> {
  const guide = await readFile('docs/guides/identities.md', 'utf8');
  const policy = /cat > agents\.yaml <<'YAML'\n([\s\S]*?)\nYAML\n/.exec(guide)?.[1];
  if (policy === undefined) throw new Error('docs/guides/identities.md has no agents.yaml block');
  return policy;
}

interface Event {
  id: string;
  kind: string;
  channel_id: string;
  guild_id: string | null;
  message_id: string;
  content: string;
  reaction?: string;
  author: { id: string };
}

describe('the inbox per bot', { timeout: 120_000 }, () => {
  let bots: TwoBots;
  let h: TestHerald;
  let sandbox: DiscordSandbox;
  let ops: { id: string; token: string };
  /** Each bot's DM channel with the person, and a message each bot sent there. */
  const dmWith: Record<'ops' | 'main', { channelId: string; messageId: string }> = { ops: { channelId: '', messageId: '' }, main: { channelId: '', messageId: '' } };
  const as = (client: string) => bots.as(client);
  const agent = (subcommand: string, botId?: string) => sandbox.invoke({ userId: IDS.user, command: 'agent', subcommand, ...(botId !== undefined ? { botId } : {}) });
  const inbox = async (client: string | undefined): Promise<Event[]> => {
    const r = await h.bridge.get('/mcp/inbox?after=0&limit=100', client === undefined ? {} : as(client));
    expect(r.status, r.text).toBe(200);
    return (r.json as { items: Event[] }).items;
  };
  const contents = async (client: string | undefined) => (await inbox(client)).filter((e) => e.kind === 'dm').map((e) => e.content);
  const sendDm = async (client: string, content: string): Promise<{ channelId: string; messageId: string }> => {
    const id = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'dm', target: { user_id: IDS.user }, body: { content } }, as(client))).status).toBe(202);
    const done = (await bots.settled(id, client)) as { state: string; url?: string };
    expect(done.state).toBe('delivered');
    // The message's link ends with its id.
    const message = sandbox.allMessages().find((m) => m.id === done.url?.split('/').at(-1));
    if (message === undefined) throw new Error('the DM is not in the sandbox');
    return { channelId: message.channel_id, messageId: message.id };
  };
  /** The person writes (through the sandbox's route, which the bots' sessions hear): to the ops bot's DM, or the default bot's. */
  const write = async (to: 'ops' | 'main', content: string, userId: string = IDS.user): Promise<void> => {
    const r = await fetch(`${sandbox.url}/sandbox/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId, dm: true, ...(to === 'ops' ? { botId: ops.id } : {}), content }) });
    expect(r.status, await r.text()).toBe(200);
  };
  const react = async (channelId: string, messageId: string, emoji: string) =>
    (await fetch(`${sandbox.url}/sandbox/api/reactions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: IDS.user, channelId, messageId, emoji }) })).status;

  beforeAll(async () => {
    bots = await startTwoBots(await guidePolicy());
    ({ h, sandbox, ops } = bots);
    // The person registers with both bots, each bot DMs them once: each its own DM channel.
    expect((await agent('register')).data?.content).toMatch(/^Registered\./);
    expect((await agent('register', ops.id)).data?.content).toMatch(/^Registered\./);
    dmWith.main = await sendDm('agent-main', 'hello from main');
    dmWith.ops = await sendDm('agent-ops', 'hello from ops');
    expect(dmWith.ops.channelId).not.toBe(dmWith.main.channelId);
  });
  afterAll(() => bots?.close());

  it("hears a DM written to each bot as that bot's: each agent reads its own bot's, never the other's", async () => {
    await write('ops', 'a word for ops');
    await write('main', 'a word for main');
    await waitFor(async () => ((await contents('agent-ops')).length > 0 ? true : undefined), 'the DM to the ops bot in the ops agent’s inbox');
    await waitFor(async () => ((await contents('agent-main')).length > 0 ? true : undefined), 'the DM to the default bot in the main agent’s inbox');
    expect(await contents('agent-ops')).toEqual(['a word for ops']);
    expect(await contents('agent-main')).toEqual(['a word for main']);
    // The connector speaks as the default bot (the policy binds it to none).
    expect(await contents(undefined)).toEqual(['a word for main']);
    // Waiting wakes on its own bot's DM only.
    const after = (await inbox('agent-ops')).at(-1)?.id ?? '0';
    const waiting = h.bridge.get(`/mcp/inbox/next?after=${after}&timeout_ms=10000`, as('agent-ops'));
    await write('main', 'main again');
    await write('ops', 'ops again');
    const woke = (await waiting).json as { event: Event | null };
    expect(woke.event?.content).toBe('ops again');
  });

  it("hears a reaction in a bot's DM as that bot's", async () => {
    expect(await react(dmWith.ops.channelId, dmWith.ops.messageId, '👍')).toBe(204);
    expect(await react(dmWith.main.channelId, dmWith.main.messageId, '🎉')).toBe(204);
    const reactions = async (client: string) => (await inbox(client)).filter((e) => e.kind === 'reaction').map((e) => e.reaction);
    await waitFor(async () => ((await reactions('agent-ops')).length > 0 && (await reactions('agent-main')).length > 0) || undefined, 'both reactions');
    expect(await reactions('agent-ops')).toEqual(['👍']);
    expect(await reactions('agent-main')).toEqual(['🎉']);
  });

  it('does not hear a DM from someone registered with another bot only', async () => {
    const stranger = '333333333333333333';
    sandbox.addUser({ id: stranger, username: 'stranger', global_name: null });
    // The stranger registers with the default bot, then writes to the ops bot's DM with them.
    expect((await sandbox.invoke({ userId: stranger, command: 'agent', subcommand: 'register' })).data?.content).toMatch(/^Registered\./);
    const before = (await inbox('agent-ops')).length;
    await write('ops', 'not registered with ops', stranger);
    // The default bot hears something of its own after it, so the ops bot's turn has passed.
    await write('main', 'a marker for main');
    await waitFor(async () => ((await contents('agent-main')).includes('a marker for main') ? true : undefined), 'the marker');
    expect((await inbox('agent-ops')).length).toBe(before);
    expect(await contents('agent-main')).not.toContain('not registered with ops');
  });

  it('hears a mention of the ops bot in a mapped channel as the ops bot’s, with its text: only the ops agent reads it; Herald’s own bot’s mentions are everyone’s', async () => {
    const say = async (content: string) => {
      const r = await fetch(`${sandbox.url}/sandbox/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: IDS.user, channelId: IDS.channels.alerts, content }) });
      expect(r.status, await r.text()).toBe(200);
    };
    await say(`<@${ops.id}> what broke last night?`);
    await say(`<@${sandbox.bot.id}> and you?`);
    const mentions = async (client: string) => (await inbox(client)).filter((e) => e.kind === 'mention').map((e) => e.content);
    await waitFor(async () => ((await mentions('agent-ops')).length > 0 && (await mentions('agent-main')).length > 0) || undefined, 'both mentions');
    // Discord gives a message's text to the bots it mentions (Herald asks no Message Content here): the ops bot's session has it.
    expect(await mentions('agent-ops')).toEqual([`<@${ops.id}> what broke last night?`, `<@${sandbox.bot.id}> and you?`]);
    expect(await mentions('agent-main')).toEqual([`<@${sandbox.bot.id}> and you?`]);
  });

  it('an unregister from one bot forgets the DMs with that bot only', async () => {
    expect((await agent('unregister', ops.id)).data?.content).toMatch(/nregistered/);
    // Its DMs and reactions there go; the mention in #alerts was said in a channel, and stays.
    await waitFor(async () => ((await inbox('agent-ops')).every((e) => e.guild_id !== null) ? true : undefined), 'the ops DMs forgotten');
    expect((await inbox('agent-ops')).map((e) => e.kind)).toEqual(['mention', 'mention']);
    expect(await contents('agent-main')).toEqual(expect.arrayContaining(['a word for main', 'main again']));
    expect((await inbox('agent-main')).some((e) => e.kind === 'reaction')).toBe(true);
  });
});
