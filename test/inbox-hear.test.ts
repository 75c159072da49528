import { REST, Routes, type APIMessage } from 'discord.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HANDOFF_SCHEMA, handoffContent } from '../src/modules/handoffs/envelope.js';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/**
 * What the inbound inbox hears, black-box over HTTP (every answer checked against the contract):
 * a person writes through the sandbox's control API, the agent reads /mcp/inbox.
 */

interface Event {
  id: string;
  event_id: string;
  kind: string;
  channel_id: string;
  guild_id: string | null;
  message_id: string;
  author: { id: string; name: string | null; bot: boolean };
  reply_to: string | null;
  content: string;
  reaction?: string;
  handoff?: { event_id: string; source_bot_id: string };
}

const STRANGER = '123456789012345699';

describe('the inbound inbox hears mentions, DMs, replies, reactions, listened channels and handoffs, and nothing else', () => {
  let sandbox: DiscordSandbox;
  let h: TestHerald;
  let peer: { user: { id: string }; token: string };

  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
    sandbox.addUser({ id: STRANGER, username: 'stranger', global_name: 'Stranger', bot: false });
    peer = sandbox.addBot('peer');
    h = await startTestHerald({ useSandbox: sandbox, env: { HERALD_TRUSTED_BOT_IDS: peer.user.id } });
    await waitFor(() => sandbox.gatewaySessions === 1 && sandbox.commands.length > 0, 'Herald on the gateway, its commands registered');
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await sandbox?.close();
  });

  /** A person writes, through the sandbox's control API. */
  const write = async (body: Record<string, unknown>): Promise<string> => {
    const res = await fetch(`${sandbox.url}/sandbox/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  };
  const all = async (): Promise<Event[]> => {
    const items: Event[] = [];
    let after = '0';
    for (;;) {
      const res = await h.bridge.get(`/mcp/inbox?after=${after}&limit=100`);
      expect(res.status).toBe(200);
      const page = res.json as { items: Event[]; next_cursor: string | null };
      items.push(...page.items);
      if (page.next_cursor === null) return items;
      after = page.next_cursor;
    }
  };
  const heard = (messageId: string) => waitFor(async () => (await all()).find((e) => e.message_id === messageId), `message ${messageId} in the inbox`, 10_000);

  it('a mention of the bot is heard with its author, channel and content where a destination maps the channel; a message in a channel nobody listens to is not stored', async () => {
    // A channel no destination maps (deals, never mapped here): a mention there is not for the agent (neither stored nor pushed).
    await h.mapDestination('ops', IDS.channels.ops);
    const unmapped = await write({ userId: IDS.user, channelId: IDS.channels.deals, content: `<@${sandbox.bot.id}> nobody mapped this channel` });
    const unrelated = await write({ userId: IDS.user, channelId: IDS.channels.ops, content: 'nothing for the bot here' });
    const mention = await write({ userId: IDS.user, channelId: IDS.channels.ops, content: `<@${sandbox.bot.id}> can you look at the deploy?` });
    const event = await heard(mention);
    expect(event).toMatchObject({
      event_id: `discord:${mention}`,
      kind: 'mention',
      platform: 'discord',
      channel_id: IDS.channels.ops,
      guild_id: IDS.guild,
      thread_id: null,
      reply_to: null,
      author: { id: IDS.user, bot: false },
      content: `<@${sandbox.bot.id}> can you look at the deploy?`,
      attachments: [],
    });
    expect((await all()).some((e) => e.message_id === unrelated)).toBe(false);
    expect((await all()).some((e) => e.message_id === unmapped)).toBe(false);
  });

  it('a listened channel: every message is stored (content empty without the Message Content intent); the admin answers stay as before for the others', async () => {
    await h.mapDestination('alerts', IDS.channels.alerts);
    await h.mapDestination('digest', IDS.channels.digest);
    const before = await write({ userId: IDS.user, channelId: IDS.channels.alerts, content: 'written before the opt-in' });
    const on = await h.admin.put(`/admin/destinations/${IDS.guild}/alerts/listen`, { listen: true });
    expect(on.status).toBe(200);
    expect(on.json).toEqual({ guild_id: IDS.guild, destination: 'alerts', channel_id: IDS.channels.alerts, listen: true });
    // A mapping that does not listen answers exactly as before.
    const list = await h.admin.get('/admin/destinations');
    expect(list.json).toEqual({
      items: [
        { guild_id: IDS.guild, destination: 'alerts', channel_id: IDS.channels.alerts, listen: true },
        { guild_id: IDS.guild, destination: 'digest', channel_id: IDS.channels.digest },
        { guild_id: IDS.guild, destination: 'ops', channel_id: IDS.channels.ops },
      ],
    });
    const plain = await write({ userId: IDS.user, channelId: IDS.channels.alerts, content: 'the disk is full again' });
    expect(await heard(plain)).toMatchObject({ kind: 'message', channel_id: IDS.channels.alerts, content: '', author: { id: IDS.user } });
    expect((await all()).some((e) => e.message_id === before)).toBe(false);
    // Bad input names the field; an unmapped destination is 404.
    expect((await h.admin.put(`/admin/destinations/${IDS.guild}/alerts/listen`, { listen: 'yes' })).json).toEqual({ error: 'listen must be true or false' });
    expect((await h.admin.put(`/admin/destinations/${IDS.guild}/deals/listen`, { listen: true })).json).toEqual({ error: 'mapping not found' });
    const off = await h.admin.put(`/admin/destinations/${IDS.guild}/alerts/listen`, { listen: false });
    expect(off.json).toEqual({ guild_id: IDS.guild, destination: 'alerts', channel_id: IDS.channels.alerts });
    const after = await write({ userId: IDS.user, channelId: IDS.channels.alerts, content: 'after the opt-out' });
    const marker = await write({ userId: IDS.user, channelId: IDS.channels.alerts, content: `<@${sandbox.bot.id}> marker` });
    await heard(marker);
    expect((await all()).some((e) => e.message_id === after)).toBe(false);
  });

  it("a reply to Herald's message and a reaction on it are heard; a reaction on a person's message is not", async () => {
    await h.mapDestination('ops', IDS.channels.ops);
    const id = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(id, 'build 42 failed', 'ops'))).status).toBe(202);
    await h.waitForState(id, 'delivered');
    const sent = sandbox.channelMessages(IDS.channels.ops).find((m) => m.content === 'build 42 failed');
    expect(sent).toBeDefined();
    const reply = await write({ userId: IDS.user, channelId: IDS.channels.ops, content: 'retrying it now', replyTo: sent?.id });
    expect(await heard(reply)).toMatchObject({ kind: 'reply', reply_to: sent?.id, content: 'retrying it now' });
    const react = async (messageId: string | undefined, emoji: string) =>
      (await fetch(`${sandbox.url}/sandbox/api/reactions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: IDS.user, channelId: IDS.channels.ops, messageId, emoji }) })).status;
    expect(await react(reply, '👀')).toBe(204);
    expect(await react(sent?.id, '👍')).toBe(204);
    const reaction = await waitFor(async () => (await all()).find((e) => e.kind === 'reaction'), 'the reaction in the inbox', 10_000);
    expect(reaction).toMatchObject({ message_id: sent?.id, reaction: '👍', author: { id: IDS.user }, content: '' });
    expect((await all()).filter((e) => e.kind === 'reaction')).toHaveLength(1);
  });

  it("after Herald only reacted to a person's message, a reply to it and a reaction on it are not Herald's: not stored; a reply that also mentions the bot is a reply", async () => {
    const theirs = await write({ userId: IDS.user, channelId: IDS.channels.ops, content: 'the deploy is done' });
    const id = newRequestId();
    const reacted = await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'reaction', target: { guild_id: IDS.guild, destination: 'ops', message_id: theirs }, body: { emoji: '✅' } });
    expect(reacted.status).toBe(202);
    await h.waitForState(id, 'delivered');
    const reply = await write({ userId: STRANGER, channelId: IDS.channels.ops, content: 'nice work', replyTo: theirs });
    const res = await fetch(`${sandbox.url}/sandbox/api/reactions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: STRANGER, channelId: IDS.channels.ops, messageId: theirs, emoji: '🎉' }) });
    expect(res.status).toBe(204);
    // Herald's own post: a reply to it that mentions the bot is heard once, as a reply (the contract's precedence).
    const postId = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(postId, 'rollout paused', 'ops'))).status).toBe(202);
    await h.waitForState(postId, 'delivered');
    const mine = sandbox.channelMessages(IDS.channels.ops).find((m) => m.content === 'rollout paused');
    const both = await write({ userId: IDS.user, channelId: IDS.channels.ops, content: `<@${sandbox.bot.id}> resume it?`, replyTo: mine?.id });
    expect(await heard(both)).toMatchObject({ kind: 'reply', reply_to: mine?.id });
    const events = await all();
    expect(events.some((e) => e.message_id === reply)).toBe(false);
    expect(events.some((e) => e.kind === 'reaction' && e.message_id === theirs)).toBe(false);
  });

  it("a registered user's DM is stored, an unregistered one's is not, and unregistering deletes the stored DMs", async () => {
    const strangerDm = await write({ userId: STRANGER, dm: true, content: 'hi bot' });
    expect((await sandbox.invoke({ userId: IDS.user, command: 'agent', subcommand: 'register' })).data?.content).toContain('Registered');
    const dm = await write({ userId: IDS.user, dm: true, content: 'please summarise my day' });
    expect(await heard(dm)).toMatchObject({ kind: 'dm', guild_id: null, content: 'please summarise my day', author: { id: IDS.user } });
    expect((await all()).some((e) => e.message_id === strangerDm)).toBe(false);
    expect((await sandbox.invoke({ userId: IDS.user, command: 'agent', subcommand: 'unregister' })).data?.content).toContain('Unregistered');
    await waitFor(async () => !(await all()).some((e) => e.kind === 'dm'), 'the DM deleted after unregister', 10_000);
    // What was not a DM stays.
    expect((await all()).some((e) => e.kind === 'mention')).toBe(true);
  });

  it('pages with a cursor, acknowledges forward only, and a waiting next wakes on the next event', async () => {
    const events = await all();
    expect(events.length).toBeGreaterThanOrEqual(3);
    const ids = events.map((e) => BigInt(e.id));
    expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(ids);
    const first = await h.bridge.get('/mcp/inbox?limit=1');
    expect(first.json).toMatchObject({ items: [{ id: events[0]?.id }], next_cursor: events[0]?.id, cursor: '0' });
    expect((await h.bridge.post('/mcp/inbox/ack', { cursor: events[1]?.id })).json).toEqual({ cursor: events[1]?.id });
    // Without `after`, a page starts after the acknowledged cursor; an older ack leaves it where it is.
    expect((await h.bridge.get('/mcp/inbox?limit=1')).json).toMatchObject({ items: [{ id: events[2]?.id }], cursor: events[1]?.id });
    expect((await h.bridge.post('/mcp/inbox/ack', { cursor: events[0]?.id })).json).toEqual({ cursor: events[1]?.id });
    const newest = events.at(-1)?.id ?? '0';
    expect((await h.bridge.post('/mcp/inbox/ack', { cursor: String(BigInt(newest) + 1000n) })).json).toEqual({ error: 'cursor is past the newest event' });
    expect((await h.bridge.post('/mcp/inbox/ack', { cursor: 'x' })).json).toEqual({ error: 'cursor must be an inbox cursor (an event id: 0 to 9223372036854775807)' });
    expect((await h.bridge.get('/mcp/inbox?after=abc')).json).toEqual({ error: 'after must be an inbox cursor (an event id: 0 to 9223372036854775807)' });
    expect((await h.bridge.get('/mcp/inbox/next?timeout_ms=30001')).json).toEqual({ error: 'timeout_ms must be 0..30000' });
    expect((await h.bridge.get(`/mcp/inbox/next?after=${newest}&timeout_ms=0`)).json).toEqual({ event: null });
    // Only with the bridge token.
    expect((await h.bridge.get('/mcp/inbox', { token: 'x'.repeat(43) })).status).toBe(401);
    expect((await h.admin.get('/mcp/inbox')).status).toBe(401);

    const started = performance.now();
    const waiting = h.bridge.get(`/mcp/inbox/next?after=${newest}&timeout_ms=20000`);
    const mention = await write({ userId: IDS.user, channelId: IDS.channels.ops, content: `<@${sandbox.bot.id}> are you there?` });
    const woke = await waiting;
    expect((woke.json as { event: Event }).event).toMatchObject({ message_id: mention, kind: 'mention' });
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it('a handoff is one kind of event in the inbox, and stays in the handoff inbox as before', async () => {
    const content = handoffContent({
      schema: HANDOFF_SCHEMA,
      source_bot_id: peer.user.id,
      target_bot_id: sandbox.bot.id,
      event_id: crypto.randomUUID(),
      origin_channel_id: IDS.channels.deals,
      origin_thread_id: null,
      origin_message_id: null,
      expires_at: Math.floor(Date.now() / 1000) + 300,
      hop_count: 0,
      payload: { text: 'please triage the deals channel' },
    });
    const sent = (await new REST({ version: '10', api: sandbox.apiUrl }).setToken(peer.token).post(Routes.channelMessages(IDS.channels.deals), {
      body: { content, allowed_mentions: { parse: [], users: [sandbox.bot.id] } },
    })) as APIMessage;
    const event = await heard(sent.id);
    expect(event).toMatchObject({ kind: 'handoff', guild_id: IDS.guild, content: 'please triage the deals channel', author: { id: peer.user.id, bot: true }, handoff: { source_bot_id: peer.user.id } });
    const handoffs = await h.bridge.get('/mcp/handoffs/inbox');
    expect((handoffs.json as { items: { handoff_message_id?: string; origin: { handoff_message_id: string } }[] }).items.map((i) => i.origin.handoff_message_id)).toContain(sent.id);
    expect((await all()).filter((e) => e.message_id === sent.id)).toHaveLength(1);
    // Nothing else of deals, which no destination maps, was stored (the first test's mention there).
    expect((await all()).filter((e) => e.channel_id === IDS.channels.deals).map((e) => e.kind)).toEqual(['handoff']);
  });
});
