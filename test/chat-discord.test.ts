import { ChannelType, type REST } from 'discord.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordChat } from '../src/platforms/discord/discord-chat.js';
import { TransportError, type History } from '../src/platforms/platform.js';
import { expectValidResponse } from './support/client.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/** The same five chat tools on Discord (the sandbox, through discord.js), over the bridge's HTTP API. */
describe('chat tools on Discord', () => {
  let h: TestHerald;

  beforeAll(async () => {
    h = await startTestHerald({ env: { HERALD_DISCORD_CHAT_GUILD: IDS.guild } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('send_message posts once as **sender**: text, and read_messages gives it back under the sender', async () => {
    const send = await h.bridge.post('/mcp/chat/messages', { channel: '#alerts', text: 'hello from ada', sender: 'ada' });
    expect(send.status).toBe(202);
    await expectValidResponse('POST', '/mcp/chat/messages', 202, send.json);
    expect(send.json).toMatchObject({ transport: 'discord', state: 'pending' });
    const id = (send.json as { id: string }).id;
    const done = await waitFor(async () => {
      const r = (await h.bridge.get(`/mcp/chat/messages/${id}`)).json as { state: string };
      return r.state !== 'pending' ? r : undefined;
    }, 'the send to settle');
    expect(done).toMatchObject({ state: 'delivered' });
    const posted = h.sandbox.allMessages().filter((m) => m.content === '**ada**: hello from ada');
    expect(posted).toHaveLength(1);
    expect(posted[0]?.channel_id).toBe(IDS.channels.alerts);
    const read = await h.bridge.get('/mcp/chat/messages?channel=alerts&limit=1');
    await expectValidResponse('GET', '/mcp/chat/messages', 200, read.json);
    expect((read.json as { messages: unknown[] }).messages).toEqual([{ at: expect.any(String), nick: 'ada', text: 'hello from ada' }]);
  });

  it('read_messages with since gives only the lines after it, newest first; a bad since is a 400 naming it', async () => {
    const sendAndSettle = async (text: string): Promise<void> => {
      const id = ((await h.bridge.post('/mcp/chat/messages', { channel: '#deals', text, sender: 'bob' })).json as { id: string }).id;
      await waitFor(async () => ((await h.bridge.get(`/mcp/chat/messages/${id}`)).json as { state: string }).state === 'delivered', `${text} to be delivered`);
    };
    await sendAndSettle('first line');
    const before = (await h.bridge.get('/mcp/chat/messages?channel=deals&limit=1')).json as { messages: { at: string; text: string }[] };
    expect(before.messages.map((m) => m.text)).toEqual(['first line']);
    const firstAt = before.messages[0]?.at ?? '';
    await sendAndSettle('second line');
    await sendAndSettle('third line');
    // Since the first line's own time (a millisecond after it): the two later lines only.
    const since = new Date(Date.parse(firstAt) + 1).toISOString();
    const after = await h.bridge.get(`/mcp/chat/messages?channel=deals&since=${encodeURIComponent(since)}`);
    await expectValidResponse('GET', '/mcp/chat/messages', 200, after.json);
    expect((after.json as { messages: { nick: string; text: string }[] }).messages.map((m) => [m.nick, m.text])).toEqual([
      ['bob', 'third line'],
      ['bob', 'second line'],
    ]);
    // Since a time before the first line: all three; since now: none.
    const all = (await h.bridge.get(`/mcp/chat/messages?channel=deals&since=${encodeURIComponent(new Date(Date.parse(firstAt) - 1).toISOString())}`)).json as { messages: { text: string }[] };
    expect(all.messages.map((m) => m.text)).toEqual(['third line', 'second line', 'first line']);
    const none = (await h.bridge.get(`/mcp/chat/messages?channel=deals&since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).json as { messages: unknown[] };
    expect(none.messages).toEqual([]);
    const bad = await h.bridge.get('/mcp/chat/messages?channel=deals&since=yesterday');
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.json)).toContain('since');
  });

  it('channels are the guild\'s text channels; create_channel makes one; members never include the bot', async () => {
    const listed = await h.bridge.get('/mcp/chat/channels');
    await expectValidResponse('GET', '/mcp/chat/channels', 200, listed.json);
    expect((listed.json as { channels: string[] }).channels).toEqual(expect.arrayContaining(['alerts', 'deals', 'digest', 'ops']));
    const created = await h.bridge.post('/mcp/chat/channels', { name: '#agents' });
    expect(created.status).toBe(201);
    await expectValidResponse('POST', '/mcp/chat/channels', 201, created.json);
    expect(created.json).toEqual({ transport: 'discord', channel: 'agents' });
    expect(((await h.bridge.get('/mcp/chat/channels')).json as { channels: string[] }).channels).toContain('agents');
    const members = await h.bridge.get('/mcp/chat/members?channel=agents');
    await expectValidResponse('GET', '/mcp/chat/members', 200, members.json);
    const names = (members.json as { members: string[] }).members;
    expect(names).toEqual(expect.arrayContaining(['Ada', 'Morgan', 'Roshne']));
    expect(names).not.toContain('Herald');
  });

  it('create_channel twice at once makes one channel: the second answers the first', async () => {
    const both = await Promise.all([1, 2].map(() => h.bridge.post('/mcp/chat/channels', { name: '#twice' })));
    expect(both.map((r) => r.json)).toEqual([
      { transport: 'discord', channel: 'twice' },
      { transport: 'discord', channel: 'twice' },
    ]);
    // Before: both found no #twice and each made one.
    expect(((await h.bridge.get('/mcp/chat/channels')).json as { channels: string[] }).channels.filter((c) => c === 'twice')).toHaveLength(1);
  });

  it('an unknown channel or transport is a clear refusal, and nothing is sent', async () => {
    const before = h.sandbox.allMessages().length;
    const noIrc = await h.bridge.post('/mcp/chat/messages', { channel: '#alerts', text: 'x', sender: 'ada', transport: 'irc' });
    expect(noIrc.status).toBe(400);
    expect(noIrc.json).toEqual({ error: 'transport irc is not configured for chat' });
    // A name of no platform is refused in the words the contract's list once gave, on every chat operation (the contract checks only its shape).
    const noSuch = { error: 'transport must be one of irc, discord, memory, slack' };
    const matrix = await h.bridge.post('/mcp/chat/messages', { channel: '#alerts', text: 'x', sender: 'ada', transport: 'matrix' });
    expect([matrix.status, matrix.json]).toEqual([400, noSuch]);
    for (const path of ['/mcp/chat/messages?channel=alerts&transport=matrix', '/mcp/chat/channels?transport=matrix', '/mcp/chat/members?channel=alerts&transport=matrix']) {
      const res = await h.bridge.get(path);
      expect([path, res.status, res.json]).toEqual([path, 400, noSuch]);
    }
    const created = await h.bridge.post('/mcp/chat/channels', { name: 'x', transport: 'matrix' });
    expect([created.status, created.json]).toEqual([400, noSuch]);
    const unknown = await h.bridge.get('/mcp/chat/messages?channel=nowhere');
    expect(unknown.status).toBe(422);
    expect((unknown.json as { error: string }).error).toContain('no text channel nowhere');
    expect(h.sandbox.allMessages().length).toBe(before);
  });
});

/**
 * A chat text of several parts fails as a whole send: once a part went out, a later part's failure
 * that by itself created nothing still leaves the send in doubt, so the next attempt proves what is
 * in the channel instead of sending the first part again.
 */
describe('a Discord chat send failing partway', () => {
  const failingAt = (failAt: number) => {
    const created: string[] = [];
    let tries = 0;
    const chat = new DiscordChat({
      rest: { get: async () => [{ id: '1', name: 'alerts', type: ChannelType.GuildText }] } as unknown as REST,
      guildId: 'g',
      selfId: async () => 'bot',
      send: async (channelId, content) => {
        if (tries++ === failAt) throw new TransportError({ kind: 'transient', detail: 'rate limited', retryAfterMs: 5 });
        created.push(content);
        return { channelId, messageId: String(created.length) };
      },
      history: {} as History,
      ledger: () => undefined,
      call: (fn) => fn(),
    });
    return { chat, created };
  };
  // Two parts on Discord (1,800 bytes a part).
  const text = 'word '.repeat(500);
  const signal = new AbortController().signal;

  it('a failure after the first part went out may have created something; before any part, it did not', async () => {
    const late = failingAt(1);
    await expect(late.chat.send('alerts', text, 'ada', 'k', new Map(), signal)).rejects.toMatchObject({ failure: { kind: 'transient', mayHaveCreated: true, retryAfterMs: 5 } });
    expect(late.created).toHaveLength(1);
    const early = failingAt(0);
    const failure = await early.chat.send('alerts', text, 'ada', 'k', new Map(), signal).catch((err: unknown) => (err as TransportError).failure);
    expect(failure).toEqual({ kind: 'transient', detail: 'rate limited', retryAfterMs: 5 });
    // Parts an earlier attempt got out (proven) are not this call's: nothing was created here.
    const resent = failingAt(0);
    const again = await resent.chat.send('alerts', text, 'ada', 'k', new Map([[0, '9']]), signal).catch((err: unknown) => (err as TransportError).failure);
    expect(again).toEqual({ kind: 'transient', detail: 'rate limited', retryAfterMs: 5 });
  });
});
