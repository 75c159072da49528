import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBridgeClient } from '../src/client/bridge-client.js';
import { HANDOFF_SCHEMA, handoffContent } from '../src/modules/handoffs/envelope.js';
import { handoffTools } from '../src/modules/handoffs/handoff.tools.js';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { mentionsOf } from '../src/platforms/discord/sandbox/state.js';
import { IDS, newRequestId, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor, waitForStateAt } from './support/wait.js';

/**
 * Two Herald bots in one sandbox Discord hand tasks to each other over the bridge: black-box HTTP,
 * every answer checked against the contract, the messages checked in the sandbox.
 */
describe('bot-to-bot handoffs between two Herald instances', () => {
  let sandbox: DiscordSandbox;
  let a: TestHerald;
  let b: TestHerald;
  let botA: string;
  let botB: string;
  let bystander: string;

  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
    const helper = sandbox.addBot('helper');
    bystander = sandbox.addBot('bystander').user.id;
    botA = sandbox.bot.id;
    botB = helper.user.id;
    a = await startTestHerald({ useSandbox: sandbox, env: { HERALD_TRUSTED_BOT_IDS: botB } });
    b = await startTestHerald({ useSandbox: sandbox, env: { DISCORD_TOKEN: helper.token, HERALD_TRUSTED_BOT_IDS: botA } });
    // Both gateways identified (Herald's and the helper's).
    await waitFor(() => sandbox.gatewaySessions === 2, 'both bots on the gateway');
    // A handoff goes only to a mapped destination's channel (or a thread under one).
    for (const destination of ['ops', 'deals', 'digest'] as const) await a.mapDestination(destination, IDS.channels[destination]);
    await b.mapDestination('ops', IDS.channels.ops);
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await sandbox?.close();
  });

  const handoffMessages = () => sandbox.allMessages().filter((m) => m.content.startsWith('<@') && m.content.includes('openab.multibot.handoff.v1'));
  const send = (from: TestHerald, body: Record<string, unknown>) => from.bridge.post('/mcp/handoffs', body);
  const delivered = (from: TestHerald, requestId: string) => waitForStateAt(from.bridge, `/mcp/handoffs/${requestId}`, 'delivered', 'the handoff to be delivered');

  it('A hands a task to B: one message mentioning only B, in B inbox with source and origin, raw text kept', async () => {
    const requestId = newRequestId();
    const text = `@everyone please summarise, and tell <@${bystander}> ${requestId.slice(0, 8)}`;
    const res = await send(a, { request_id: requestId, target_bot_id: botB, channel_id: IDS.channels.ops, text });
    expect(res.status).toBe(202);
    const accepted = res.json as { handoff: Record<string, unknown>; existing: boolean };
    expect(accepted.existing).toBe(false);
    expect(accepted.handoff['state']).toBe('pending');
    const sent = await delivered(a, requestId);
    const [message] = handoffMessages().filter((m) => m.content.includes(String(sent['event_id'])));
    expect(message?.author.id).toBe(botA);
    expect(sent['url']).toBe(`https://discord.com/channels/${IDS.guild}/${IDS.channels.ops}/${message?.id}`);
    expect(message?.allowed_mentions).toEqual({ parse: [], users: [botB] });
    // Pings B and no one else (not @everyone, not the bystander named in the text).
    expect(mentionsOf(message ?? { content: '' })).toEqual({ users: [botB], everyone: false });
    const [header, body] = (message?.content ?? '').split('\n');
    expect(header).toBe(`<@${botB}>`);
    const envelope = JSON.parse(body ?? '{}') as Record<string, unknown>;
    expect(envelope).toMatchObject({ schema: 'openab.multibot.handoff.v1', source_bot_id: botA, target_bot_id: botB, origin_channel_id: IDS.channels.ops, origin_thread_id: null, hop_count: 0, payload: { text } });
    const ttl = Number(envelope['expires_at']) - Math.floor(Date.now() / 1000);
    expect(ttl).toBeGreaterThan(250);
    expect(ttl).toBeLessThanOrEqual(300);

    const next = await b.bridge.get('/mcp/handoffs/inbox/next?timeout_ms=20000');
    const item = (next.json as { handoff: Record<string, unknown> | null }).handoff;
    expect(item).toMatchObject({ event_id: envelope['event_id'], source_bot_id: botA, text, origin: { channel_id: IDS.channels.ops, thread_id: null, message_id: null, handoff_message_id: message?.id } });
    const list = await b.bridge.get('/mcp/handoffs/inbox');
    expect((list.json as { items: unknown[] }).items).toHaveLength(1);
    expect((await b.bridge.post('/mcp/handoffs/inbox/ack', { ids: [item?.['id']] })).json).toEqual({ acknowledged: 1 });
    expect((await b.bridge.get('/mcp/handoffs/inbox')).json).toEqual({ items: [], next_cursor: null });
    // A sent handoff is not a delivery on the deliveries wire, and A's own inbox is empty.
    expect((await a.bridge.get(`/mcp/deliveries/${requestId}`)).status).toBe(404);
    expect((await a.bridge.get('/mcp/handoffs/inbox')).json).toEqual({ items: [], next_cursor: null });
  });

  it('B hands it back to A in a thread; the thread is the origin', async () => {
    const thread = sandbox.createThread(IDS.channels.ops, 'summary');
    const requestId = newRequestId();
    const res = await send(b, { request_id: requestId, target_bot_id: botA, channel_id: thread.id, in_thread: true, text: 'done: 3 alerts, all resolved', origin_message_id: '456789012345678901' });
    expect(res.status).toBe(202);
    await delivered(b, requestId);
    const next = await a.bridge.get('/mcp/handoffs/inbox/next?timeout_ms=20000');
    expect((next.json as { handoff: unknown }).handoff).toMatchObject({ source_bot_id: botB, text: 'done: 3 alerts, all resolved', origin: { channel_id: thread.id, thread_id: thread.id, message_id: '456789012345678901' } });
  });

  it('a repeated request_id posts once; reused for another request it is refused', async () => {
    const requestId = newRequestId();
    const body = { request_id: requestId, target_bot_id: botB, channel_id: IDS.channels.digest, text: `once ${requestId}` };
    const first = (await send(a, body)).json as { handoff: Record<string, unknown> };
    const again = await send(a, body);
    expect(again.status).toBe(202);
    expect((again.json as { existing: boolean; handoff: Record<string, unknown> }).handoff['event_id']).toBe(first.handoff['event_id']);
    expect((await send(a, { ...body, text: 'something else' })).json).toEqual({ error: 'request_id was already used for a different request' });
    await delivered(a, requestId);
    expect((await send(a, body)).json).toMatchObject({ existing: true, handoff: { state: 'delivered' } });
    expect(handoffMessages().filter((m) => m.content.includes(`once ${requestId}`))).toHaveLength(1);
    // B takes it in once; acknowledged, so later tests start from an empty inbox.
    const item = await waitFor(async () => ((await b.bridge.get('/mcp/handoffs/inbox')).json as { items: { id: string; text: string }[] }).items.find((i) => i.text === `once ${requestId}`), 'B to take it in');
    expect((await b.bridge.post('/mcp/handoffs/inbox/ack', { ids: [item.id] })).json).toEqual({ acknowledged: 1 });
  });

  it('refuses, with a clear reason and nothing stored: untrusted, itself, not a snowflake, blank, too long for one message', async () => {
    const before = sandbox.allMessages().length;
    const base = { target_bot_id: botB, channel_id: IDS.channels.ops, text: 'x' };
    const refusals: [Record<string, unknown>, string][] = [
      [{ target_bot_id: bystander }, 'target_bot_id is not in HERALD_TRUSTED_BOT_IDS'],
      [{ target_bot_id: botA }, 'target_bot_id is this bot: a bot cannot hand off to itself'],
      [{ target_bot_id: '12345' }, 'target_bot_id must be a snowflake'],
      [{ channel_id: 'general' }, 'channel_id must be a snowflake'],
      [{ text: '' }, 'text must be 1..2000 characters'],
      [{ text: '   ' }, 'text must not be empty'],
      [{ expires_in_seconds: 301 }, 'expires_in_seconds must be an integer from 1 to 300'],
    ];
    for (const [change, error] of refusals) {
      const requestId = newRequestId();
      const res = await send(a, { request_id: requestId, ...base, ...change });
      expect([res.status, res.json]).toEqual([400, { error }]);
      expect((await a.bridge.get(`/mcp/handoffs/${requestId}`)).status).toBe(404);
    }
    // The envelope around the text takes ~380 units: 1,700 characters of text make a message over 2,000.
    const tooLong = await send(a, { request_id: newRequestId(), ...base, text: 'é'.repeat(1700) });
    expect(tooLong.status).toBe(400);
    expect((tooLong.json as { error: string }).error).toMatch(/^the handoff message would be 2\d{3} characters, over Discord's 2000/);
    expect(sandbox.allMessages().length).toBe(before);
  });

  it('goes only to a mapped destination channel or a thread under one: a DM, an unmapped channel or its thread is refused naming channel_id, nothing stored', async () => {
    const before = sandbox.allMessages().length;
    // The DM channel of a person (as the review found: a user who had unregistered), opened as Discord would.
    const opened = await fetch(`${sandbox.apiUrl}/v10/users/@me/channels`, {
      method: 'POST',
      headers: { authorization: `Bot ${sandbox.botToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ recipient_id: IDS.user }),
    });
    const dm = ((await opened.json()) as { id: string }).id;
    const unmappedThread = sandbox.createThread(IDS.channels.alerts, 'not a destination of A');
    const error = "channel_id must be a mapped destination's channel or a thread under one (map it with /destinations set or PUT /admin/destinations/{guild_id}/{destination})";
    for (const channel of [dm, IDS.channels.alerts, unmappedThread.id, IDS.otherChannel, '999999999999999999']) {
      const requestId = newRequestId();
      const res = await send(a, { request_id: requestId, target_bot_id: botB, channel_id: channel, text: 'anywhere?' });
      expect({ channel, status: res.status, body: res.json }).toEqual({ channel, status: 400, body: { error } });
      expect((await a.bridge.get(`/mcp/handoffs/${requestId}`)).status).toBe(404);
    }
    expect(sandbox.allMessages().length).toBe(before);

    // Stored while mapped, the same request still answers as stored once the mapping is gone; a new one is refused.
    await a.mapDestination('alerts', IDS.channels.alerts);
    const requestId = newRequestId();
    const body = { request_id: requestId, target_bot_id: botB, channel_id: IDS.channels.alerts, text: `mapped then unmapped ${requestId}` };
    expect((await send(a, body)).status).toBe(202);
    await delivered(a, requestId);
    expect((await a.admin.delete(`/admin/destinations/${IDS.guild}/alerts`)).status).toBe(204);
    const again = await send(a, body);
    expect([again.status, (again.json as { existing: boolean }).existing]).toEqual([202, true]);
    const fresh = await send(a, { ...body, request_id: newRequestId() });
    expect([fresh.status, fresh.json]).toEqual([400, { error }]);
    const item = await waitFor(async () => ((await b.bridge.get('/mcp/handoffs/inbox')).json as { items: { id: string; text: string }[] }).items.find((i) => i.text === body.text), 'B to take it in');
    await b.bridge.post('/mcp/handoffs/inbox/ack', { ids: [item.id] });
  });

  it('a message of exactly 2,000 UTF-16 units is sent and arrives whole; one unit more is refused, never truncated or split', async () => {
    // The envelope around the text, with these ids and a null origin message and thread.
    const overhead = handoffContent({
      schema: HANDOFF_SCHEMA,
      source_bot_id: botA,
      target_bot_id: botB,
      event_id: '00000000-0000-4000-8000-000000000000',
      origin_channel_id: IDS.channels.deals,
      origin_thread_id: null,
      origin_message_id: null,
      expires_at: Math.floor(Date.now() / 1000) + 60,
      hop_count: 0,
      payload: { text: '' },
    }).length;
    const text = (n: number): string => `😀${'y'.repeat(n - 2)}`;
    const over = await send(a, { request_id: newRequestId(), target_bot_id: botB, channel_id: IDS.channels.deals, text: text(2001 - overhead), expires_in_seconds: 60 });
    expect([over.status, over.json]).toEqual([400, { error: "the handoff message would be 2001 characters, over Discord's 2000: shorten text (it is never truncated or split)" }]);
    const requestId = newRequestId();
    const fits = text(2000 - overhead);
    const res = await send(a, { request_id: requestId, target_bot_id: botB, channel_id: IDS.channels.deals, text: fits, expires_in_seconds: 60 });
    expect(res.status).toBe(202);
    const sent = await delivered(a, requestId);
    expect(handoffMessages().find((m) => m.content.includes(String(sent['event_id'])))?.content).toHaveLength(2000);
    const found = await waitFor(async () => {
      const items = ((await b.bridge.get('/mcp/handoffs/inbox')).json as { items: { text: string; id: string }[] }).items;
      return items.find((i) => i.text === fits);
    }, 'the long handoff in B inbox');
    await b.bridge.post('/mcp/handoffs/inbox/ack', { ids: [found.id] });
  });

  it('ordinary posts stay inert: no mentions parsed, nobody pinged', async () => {
    await a.mapDestination('alerts', IDS.channels.alerts);
    const requestId = newRequestId();
    await a.bridge.post('/mcp/deliveries', { request_id: requestId, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts' }, body: { content: `<@${botB}> @everyone plain post` } });
    await a.waitForState(requestId, 'delivered');
    const post = sandbox.channelMessages(IDS.channels.alerts).find((m) => m.content.endsWith('plain post'));
    expect(post?.allowed_mentions).toEqual({ parse: [] });
    expect(mentionsOf(post ?? { content: '' })).toEqual({ users: [], everyone: false });
    // B's gateway saw it without content, so nothing reached B's inbox.
    expect((await b.bridge.get('/mcp/handoffs/inbox/next?timeout_ms=300')).json).toEqual({ handoff: null });
  });

  it('the MCP tools: hand_off from A, wait_for_handoff and list_handoffs on B (acknowledged once read)', async () => {
    const tools = new Map(handoffTools().map((t) => [t.name, t]));
    const depsA = { bridge: createBridgeClient({ baseUrl: a.url, token: a.bridgeToken }), waitMs: 15_000 };
    const depsB = { bridge: createBridgeClient({ baseUrl: b.url, token: b.bridgeToken }), waitMs: 15_000 };
    const call = async (deps: typeof depsA, name: string, args: Record<string, unknown>) => {
      const result = await tools.get(name)?.handler(args, deps);
      return { text: (result?.content[0] as { text: string } | undefined)?.text ?? '', isError: result?.isError === true };
    };
    const sent = await call(depsA, 'hand_off', { target_bot_id: botB, channel_id: IDS.channels.ops, text: 'via mcp, first' });
    expect(sent).toMatchObject({ isError: false });
    expect(sent.text).toMatch(new RegExp(`^Handed off to bot ${botB}: https://discord.com/channels/`));
    // The API's own name for the wait (timeout_ms); timeout_seconds stays as a deprecated alias (below).
    const waited = await call(depsB, 'wait_for_handoff', { timeout_ms: 20_000 });
    expect(JSON.parse(waited.text)).toMatchObject({ from_bot_id: botA, text: 'via mcp, first', origin: { channel_id: IDS.channels.ops } });
    await call(depsA, 'hand_off', { target_bot_id: botB, channel_id: IDS.channels.ops, text: 'via mcp, second' });
    const listed = await waitFor(async () => {
      const page = JSON.parse((await call(depsB, 'list_handoffs', {})).text) as { handoffs: { text: string }[] };
      return page.handoffs.length > 0 ? page : undefined;
    }, 'the second handoff');
    expect(listed.handoffs.map((h) => h.text)).toEqual(['via mcp, second']);
    expect(JSON.parse((await call(depsB, 'list_handoffs', {})).text)).toEqual({ handoffs: [], next_cursor: null });
    expect(await call(depsA, 'hand_off', { target_bot_id: bystander, channel_id: IDS.channels.ops, text: 'no' })).toEqual({ isError: true, text: 'Herald refused the request: target_bot_id is not in HERALD_TRUSTED_BOT_IDS.' });
    expect((await call(depsB, 'wait_for_handoff', { timeout_seconds: 0 })).text).toBe('No handoff arrived within 0 seconds.');
    expect((await call(depsB, 'wait_for_handoff', { timeout_ms: 0, timeout_seconds: 20 })).text).toBe('No handoff arrived within 0 seconds.');
  });

  it('a wait for the next handoff is bounded', async () => {
    const res = await b.bridge.get('/mcp/handoffs/inbox/next?timeout_ms=30001');
    expect([res.status, res.json]).toEqual([400, { error: 'timeout_ms must be 0..30000' }]);
  });
});
