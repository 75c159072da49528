import { once } from 'node:events';
import { Client, Events, GatewayIntentBits, Partials, REST, Routes, type APIMessage, type APIUser, type Message } from 'discord.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox, SANDBOX_IDS } from '../src/platforms/discord/sandbox/sandbox.js';
import { waitFor } from './support/wait.js';

/**
 * The sandbox hosts several bots, as Discord does: each its own token, identity, gateway session
 * and nonces; a message reaches every connected bot, with content only for its author and the bots
 * it mentions (no Message Content intent); threads announced to all. Driven by real discord.js.
 */
describe('a sandbox with several bots', () => {
  let sandbox: DiscordSandbox;
  let peer: { id: string; token: string };
  const clients: Client[] = [];
  const seen = new Map<string, Message[]>();

  async function connect(token: string, name: string): Promise<Client> {
    const client = new Client({ intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages], partials: [Partials.Channel], rest: { api: sandbox.apiUrl } });
    seen.set(name, []);
    client.on(Events.MessageCreate, (m) => seen.get(name)?.push(m));
    const ready = once(client, Events.ClientReady);
    await client.login(token);
    await ready;
    clients.push(client);
    return client;
  }
  const rest = (token: string) => new REST({ version: '10', api: sandbox.apiUrl }).setToken(token);

  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
    const added = sandbox.addBot('peer');
    peer = { id: added.user.id, token: added.token };
    await connect(sandbox.botToken, 'herald');
    await connect(peer.token, 'peer');
  });
  afterAll(async () => {
    for (const c of clients) await c.destroy();
    await sandbox.close();
  });

  it('gives each bot its own identity, and the same bot for the same username', async () => {
    expect(peer.id).toBe('111111111111111112');
    expect(sandbox.addBot('peer').token).toBe(peer.token);
    expect(((await rest(peer.token).get(Routes.user('@me'))) as APIUser).id).toBe(peer.id);
    expect(((await rest(sandbox.botToken).get(Routes.user('@me'))) as APIUser).id).toBe(sandbox.bot.id);
    await expect(rest('sandbox.nobody').get(Routes.user('@me'))).rejects.toMatchObject({ status: 401 });
  });

  it('sends a message to every bot, with content only for the author and the bots it mentions', async () => {
    const mention = (await rest(sandbox.botToken).post(Routes.channelMessages(SANDBOX_IDS.channels.ops), {
      body: { content: `<@${peer.id}>\nfor you`, allowed_mentions: { parse: [], users: [peer.id] } },
    })) as APIMessage;
    const inert = (await rest(sandbox.botToken).post(Routes.channelMessages(SANDBOX_IDS.channels.ops), {
      body: { content: `<@${peer.id}> @everyone not a ping`, allowed_mentions: { parse: [] } },
    })) as APIMessage;
    const peerSaw = (id: string) => waitFor(() => seen.get('peer')?.find((m) => m.id === id), `peer to see ${id}`);
    expect((await peerSaw(mention.id)).content).toBe(`<@${peer.id}>\nfor you`);
    expect((await peerSaw(mention.id)).author.bot).toBe(true);
    expect((await peerSaw(inert.id)).content).toBe('');
    expect((await waitFor(() => seen.get('herald')?.find((m) => m.id === inert.id), 'the author to see its own')).content).toBe(`<@${peer.id}> @everyone not a ping`);
    expect(mention.mentions.map((u) => u.id)).toEqual([peer.id]);
    expect(inert.mentions).toEqual([]);
    expect(inert.mention_everyone).toBe(false);
  });

  it('keeps nonces per bot, and lets a bot edit only its own messages', async () => {
    const body = { content: 'same nonce', nonce: 'n-1', enforce_nonce: true, allowed_mentions: { parse: [] } };
    const fromHerald = (await rest(sandbox.botToken).post(Routes.channelMessages(SANDBOX_IDS.channels.digest), { body })) as APIMessage;
    const fromPeer = (await rest(peer.token).post(Routes.channelMessages(SANDBOX_IDS.channels.digest), { body })) as APIMessage;
    expect(fromPeer.id).not.toBe(fromHerald.id);
    expect(fromPeer.author.id).toBe(peer.id);
    expect(((await rest(peer.token).post(Routes.channelMessages(SANDBOX_IDS.channels.digest), { body })) as APIMessage).id).toBe(fromPeer.id);
    await expect(rest(peer.token).patch(Routes.channelMessage(SANDBOX_IDS.channels.digest, fromHerald.id), { body: { content: 'hijack' } })).rejects.toMatchObject({ status: 403 });
  });

  it('announces a thread to every bot, and delivers messages in it', async () => {
    const thread = sandbox.createThread(SANDBOX_IDS.channels.ops, 'work');
    const peerClient = clients[1];
    await waitFor(() => peerClient?.channels.cache.get(thread.id), 'the peer to know the thread');
    const sent = (await rest(sandbox.botToken).post(Routes.channelMessages(thread.id), { body: { content: `<@${peer.id}>\nin the thread`, allowed_mentions: { parse: [], users: [peer.id] } } })) as APIMessage;
    const got = await waitFor(() => seen.get('peer')?.find((m) => m.id === sent.id), 'the peer to see the thread message');
    expect(got.channelId).toBe(thread.id);
    expect(got.channel.isThread()).toBe(true);
    expect(got.content).toBe(`<@${peer.id}>\nin the thread`);
  });
});

/** Discord keeps each bot's rate limits apart (its global limit and its route buckets are the token's): so does the sandbox. */
describe('a sandbox with several bots, rate limited', () => {
  let sandbox: DiscordSandbox;
  beforeAll(async () => {
    sandbox = await new DiscordSandbox({ routeLimit: { limit: 2, windowMs: 60_000 }, globalLimit: { limit: 3, windowMs: 60_000 } }).start();
  });
  afterAll(() => sandbox.close());

  it("answers one bot 429 for its own flood only: the other bot's requests are admitted", async () => {
    const peer = sandbox.addBot('peer');
    const get = (token: string, path: string) => fetch(`${sandbox.apiUrl}/v10${path}`, { headers: { authorization: `Bot ${token}` } });
    // Herald's bot: the route's bucket (2), then its global limit (3).
    const mine = [];
    for (let i = 0; i < 2; i++) mine.push((await get(sandbox.botToken, '/users/@me')).status);
    mine.push((await get(sandbox.botToken, '/applications/@me')).status);
    const refused = await get(sandbox.botToken, '/gateway/bot');
    expect(mine).toEqual([200, 200, 200]);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('x-ratelimit-scope')).toBe('global');
    // The peer bot, in the same minute, on the same routes: its own buckets.
    const theirs = [];
    for (let i = 0; i < 2; i++) theirs.push((await get(peer.token, '/users/@me')).status);
    theirs.push((await get(peer.token, '/applications/@me')).status);
    expect(theirs).toEqual([200, 200, 200]);
    // And past its own limit, 429 for it too.
    expect((await get(peer.token, '/gateway/bot')).status).toBe(429);
  });

  it("counts no interaction callback against a bot's limits: made with no bot token, anyone could spend them", async () => {
    const sandbox2 = await new DiscordSandbox({ globalLimit: { limit: 2, windowMs: 60_000 } }).start();
    try {
      for (let i = 0; i < 4; i++) {
        const r = await fetch(`${sandbox2.apiUrl}/v10/interactions/100${i}/bogus/callback`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"type":4}' });
        expect(r.status).not.toBe(429);
      }
      const mine = await fetch(`${sandbox2.apiUrl}/v10/users/@me`, { headers: { authorization: `Bot ${sandbox2.botToken}` } });
      expect(mine.status).toBe(200);
    } finally {
      await sandbox2.close();
    }
  });

  it('gives each bot its own DM channel with a person: another bot can neither read nor write there; a DM to a bot reaches that bot', async () => {
    // A sandbox of its own: the flood above spent the peer bot's budget here.
    const own = await new DiscordSandbox().start();
    const other = own.addBot('peer');
    const heard = new Map<string, Message[]>([['herald', []], ['peer', []]]);
    const reacted = new Map<string, string[]>([['herald', []], ['peer', []]]);
    const listening: Client[] = [];
    try {
      for (const [name, token] of [['herald', own.botToken], ['peer', other.token]] as const) {
        const client = new Client({ intents: [GatewayIntentBits.DirectMessages, GatewayIntentBits.DirectMessageReactions], partials: [Partials.Channel, Partials.Message, Partials.Reaction], rest: { api: own.apiUrl } });
        client.on(Events.MessageCreate, (m) => heard.get(name)?.push(m));
        client.on(Events.MessageReactionAdd, (r) => void reacted.get(name)?.push(r.message.channelId));
        const ready = once(client, Events.ClientReady);
        await client.login(token);
        await ready;
        listening.push(client);
      }
      const as = (token: string) => new REST({ version: '10', api: own.apiUrl }).setToken(token);
      const user = SANDBOX_IDS.user;
      const open = async (token: string) => (await as(token).post(Routes.userChannels(), { body: { recipient_id: user } })) as { id: string };
      const heraldDm = await open(own.botToken);
      const peerDm = await open(other.token);
      expect(peerDm.id).not.toBe(heraldDm.id);
      expect((await open(other.token)).id).toBe(peerDm.id);
      for (const call of [() => as(other.token).get(Routes.channelMessages(heraldDm.id)), () => as(other.token).post(Routes.channelMessages(heraldDm.id), { body: { content: 'not mine' } }), () => as(own.botToken).get(Routes.channel(peerDm.id))]) {
        await expect(call()).rejects.toMatchObject({ status: 403, code: 50001 });
      }
      // The person writes to the peer bot: the peer hears it, Herald's bot does not.
      const res = await fetch(`${own.url}/sandbox/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: user, dm: true, botId: other.user.id, content: 'to the peer bot' }) });
      expect(await res.json()).toMatchObject({ channel_id: peerDm.id });
      await waitFor(() => heard.get('peer')?.some((m) => m.content === 'to the peer bot') || undefined, 'the peer bot to hear its DM');
      await fetch(`${own.url}/sandbox/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: user, dm: true, content: 'to herald' }) });
      await waitFor(() => heard.get('herald')?.some((m) => m.content === 'to herald') || undefined, 'Herald to hear its DM');
      expect(heard.get('herald')?.some((m) => m.channelId === peerDm.id)).toBe(false);
      expect(heard.get('peer')?.some((m) => m.channelId === heraldDm.id)).toBe(false);
      // The person reacts in the peer's DM: only the peer is told.
      const peerMessage = heard.get('peer')?.find((m) => m.content === 'to the peer bot');
      const react = await fetch(`${own.url}/sandbox/api/reactions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: user, channelId: peerDm.id, messageId: peerMessage?.id, emoji: '👍' }) });
      expect(react.status).toBe(204);
      await waitFor(() => reacted.get('peer')?.includes(peerDm.id) || undefined, 'the peer bot to hear the reaction');
      expect(reacted.get('herald')).toEqual([]);
    } finally {
      for (const c of listening) await c.destroy();
      await own.close();
    }
  });
});
