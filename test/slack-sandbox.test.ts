import { SocketModeClient } from '@slack/socket-mode';
import { ErrorCode, LogLevel, type WebAPICallResult, type WebClient } from '@slack/web-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SLACK_SANDBOX_IDS, SlackSandbox } from '../src/platforms/slack/sandbox/sandbox.js';
import { failure, herald, webClient } from './support/slack-sandbox.js';
import { waitFor } from './support/wait.js';

const { channels, users, bot } = SLACK_SANDBOX_IDS;

describe('Slack sandbox: the Web API as @slack/web-api sees it', () => {
  const sandbox = new SlackSandbox({ postsPerSecondPerChannel: 1_000, tierScale: 100 });
  let slack: WebClient;
  beforeAll(async () => {
    await sandbox.start();
    slack = webClient(sandbox);
  });
  afterAll(() => sandbox.close());

  it('auth.test answers the bot and the workspace url', async () => {
    const me = await slack.auth.test();
    expect(me).toMatchObject({ ok: true, url: `${sandbox.url}/`, team_id: SLACK_SANDBOX_IDS.team, user_id: bot.user, bot_id: bot.id });
  });

  it('keeps a post with its metadata and username, and gives the metadata back only with include_all_metadata', async () => {
    const posted = await slack.chat.postMessage({ channel: channels.general, text: 'hello *world*', username: 'Agent Smith', metadata: herald('k-1') });
    expect(posted.ok).toBe(true);
    expect(posted.channel).toBe(channels.general);
    expect(posted.ts).toMatch(/^\d+\.\d{6}$/);
    expect(posted.message?.metadata).toEqual(herald('k-1'));
    const stored = sandbox.messages(channels.general).find((m) => m.ts === posted.ts);
    expect(stored).toMatchObject({ user: bot.user, text: 'hello *world*', username: 'Agent Smith', metadata: herald('k-1') });

    const plain = await slack.conversations.history({ channel: channels.general, limit: 1 });
    expect(plain.messages?.[0]?.ts).toBe(posted.ts);
    expect(plain.messages?.[0]).not.toHaveProperty('metadata');
    const withMetadata = await slack.conversations.history({ channel: channels.general, limit: 1, include_all_metadata: true });
    expect(withMetadata.messages?.[0]).toMatchObject({ ts: posted.ts, username: 'Agent Smith', bot_id: bot.id, metadata: herald('k-1') });
  });

  it('pages history newest first with cursors, within oldest/latest', async () => {
    const { channel } = await slack.conversations.create({ name: 'paging' });
    const id = channel?.id ?? '';
    const sent: string[] = [];
    for (let i = 0; i < 7; i += 1) sent.push((await slack.chat.postMessage({ channel: id, text: `line ${i}` })).ts ?? '');
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await slack.conversations.history({ channel: id, limit: 3, ...(cursor === undefined ? {} : { cursor }) });
      seen.push(...(page.messages ?? []).map((m) => m.ts ?? ''));
      expect(page.has_more).toBe(page.response_metadata?.next_cursor !== '');
      cursor = page.response_metadata?.next_cursor || undefined;
      pages += 1;
    } while (cursor !== undefined);
    expect(pages).toBe(3);
    expect(seen).toEqual([...sent].reverse());
    // oldest is exclusive unless inclusive; latest likewise.
    const between = await slack.conversations.history({ channel: id, oldest: sent[1] ?? '', latest: sent[4] ?? '' });
    expect(between.messages?.map((m) => m.ts)).toEqual([sent[3], sent[2]]);
    const inclusive = await slack.conversations.history({ channel: id, oldest: sent[1] ?? '', latest: sent[4] ?? '', inclusive: true });
    expect(inclusive.messages?.map((m) => m.ts)).toEqual([sent[4], sent[3], sent[2], sent[1]]);
    expect(await failure(slack.conversations.history({ channel: id, cursor: 'bm9wZQ==' }))).toMatchObject({ error: 'invalid_cursor' });
  });

  it('edits, links, joins, opens DMs and describes conversations and users', async () => {
    const posted = await slack.chat.postMessage({ channel: channels.general, text: 'first' });
    const ts = posted.ts ?? '';
    const updated = await slack.chat.update({ channel: channels.general, ts, text: 'second' });
    expect(updated).toMatchObject({ ok: true, ts, text: 'second' });
    expect(sandbox.messages(channels.general).find((m) => m.ts === ts)).toMatchObject({ text: 'second', edited: { user: bot.user } });
    const link = await slack.chat.getPermalink({ channel: channels.general, message_ts: ts });
    expect(link.permalink).toBe(`${sandbox.url}/archives/${channels.general}/p${ts.replace('.', '')}`);

    expect((await slack.conversations.join({ channel: channels.alerts })).channel?.is_member).toBe(true);
    expect((await slack.conversations.join({ channel: channels.alerts })).warning).toBe('already_in_channel');
    await slack.chat.postMessage({ channel: channels.alerts, text: 'alert' });
    expect((await slack.conversations.members({ channel: channels.alerts })).members).toContain(bot.user);

    const dm = await slack.conversations.open({ users: users.ada });
    expect(dm.channel?.id).toMatch(/^D/);
    expect((await slack.conversations.open({ users: users.ada })).channel?.id).toBe(dm.channel?.id);
    await slack.chat.postMessage({ channel: dm.channel?.id ?? '', text: 'psst' });
    expect(sandbox.messages(dm.channel?.id ?? '').map((m) => m.text)).toEqual(['psst']);
    expect((await slack.conversations.info({ channel: dm.channel?.id ?? '' })).channel).toMatchObject({ is_im: true, user: users.ada });

    const list = await slack.conversations.list({ types: 'public_channel,im' });
    expect(list.channels?.map((c) => c.id)).toEqual(expect.arrayContaining([channels.general, channels.alerts, dm.channel?.id]));
    expect((await slack.conversations.info({ channel: channels.general })).channel).toMatchObject({ name: 'general', is_channel: true, is_member: true });
    expect((await slack.users.info({ user: users.ada })).user).toMatchObject({ id: users.ada, name: 'ada', is_admin: true, is_bot: false });
  });

  it('answers each of Slack\'s errors', async () => {
    const errorOf = async (call: Promise<WebAPICallResult>): Promise<string | undefined> => (await failure(call)).error;
    expect(await errorOf(slack.chat.postMessage({ channel: 'C0NOWHERE01', text: 'x' }))).toBe('channel_not_found');
    expect(await errorOf(slack.chat.postMessage({ channel: channels.general, text: 'x'.repeat(40_001) }))).toBe('msg_too_long');
    expect(await errorOf(slack.chat.postMessage({ channel: channels.general, text: '' }))).toBe('no_text');
    expect(await errorOf(webClient(sandbox, 'xoxb-wrong').auth.test())).toBe('invalid_auth');
    expect(await errorOf(webClient(sandbox, '').auth.test())).toBe('not_authed');
    expect(await errorOf(slack.chat.update({ channel: channels.general, ts: '1.000001', text: 'x' }))).toBe('message_not_found');
    const theirs = sandbox.say(users.ada, channels.general, 'mine');
    expect(await errorOf(slack.chat.update({ channel: channels.general, ts: theirs, text: 'x' }))).toBe('cant_update_message');
    expect(await errorOf(slack.chat.getPermalink({ channel: channels.general, message_ts: '1.000001' }))).toBe('message_not_found');
    expect(await errorOf(slack.conversations.create({ name: 'general' }))).toBe('name_taken');
    expect(await errorOf(slack.conversations.create({ name: 'Bad Name!' }))).toBe('invalid_name_specials');
    expect(await errorOf(slack.users.info({ user: 'U0NOBODY001' }))).toBe('user_not_found');
    expect(await errorOf(slack.conversations.open({ users: 'U0NOBODY001' }))).toBe('user_not_found');
    expect(await errorOf(slack.apps.connections.open())).toBe('not_allowed_token_type');

    const fresh = new SlackSandbox();
    await fresh.start();
    try {
      // The bot is not in #alerts until it joins.
      expect(await errorOf(webClient(fresh).chat.postMessage({ channel: channels.alerts, text: 'x' }))).toBe('not_in_channel');
      expect(await errorOf(webClient(fresh).conversations.history({ channel: channels.alerts }))).toBe('not_in_channel');
    } finally {
      await fresh.close();
    }
  });

  it('accepts JSON bodies as well as forms', async () => {
    const answer = await fetch(`${sandbox.apiUrl}chat.postMessage`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sandbox.botToken}`, 'content-type': 'application/json; charset=utf-8' },
      body: JSON.stringify({ channel: channels.general, text: 'by json', metadata: herald('k-json') }),
    });
    const body = (await answer.json()) as { ok: boolean; ts: string };
    expect(body.ok).toBe(true);
    expect(sandbox.messages(channels.general).find((m) => m.ts === body.ts)?.metadata).toEqual(herald('k-json'));
  });
});

describe('Slack sandbox: faults and rate limits', () => {
  const sandbox = new SlackSandbox();
  beforeAll(() => sandbox.start());
  afterAll(() => sandbox.close());

  it('a dropped answer: the message exists though the client got an error', async () => {
    const slack = webClient(sandbox);
    const before = sandbox.calls('chat.postMessage');
    sandbox.faults.dropAnswerAfterCreate();
    const err = await failure(slack.chat.postMessage({ channel: channels.general, text: 'in doubt', metadata: herald('k-drop') }));
    expect(err.code).toBe(ErrorCode.RequestError);
    expect(sandbox.calls('chat.postMessage')).toBe(before + 1);
    const kept = sandbox.messages(channels.general).filter((m) => m.metadata?.event_payload['id'] === 'k-drop');
    expect(kept.map((m) => m.text)).toEqual(['in doubt']);
  });

  it('an injected 5xx does nothing', async () => {
    sandbox.faults.failNext('chat.postMessage', 503);
    const err = await failure(webClient(sandbox).chat.postMessage({ channel: channels.general, text: 'never', metadata: herald('k-503') }));
    expect(err).toMatchObject({ code: ErrorCode.HTTPError, statusCode: 503 });
    expect(sandbox.messages(channels.general).some((m) => m.metadata?.event_payload['id'] === 'k-503')).toBe(false);
  });

  it('answers 429 with Retry-After and ratelimited: injected, per channel per second, and per method tier', async () => {
    const slack = webClient(sandbox);
    const before = sandbox.ratelimited;
    sandbox.faults.rateLimitNext('chat.postMessage', 7);
    expect(await failure(slack.chat.postMessage({ channel: channels.general, text: 'x' }))).toMatchObject({ code: ErrorCode.RateLimitedError, retryAfter: 7 });
    expect(sandbox.ratelimited).toBe(before + 1);
    const raw = await fetch(`${sandbox.apiUrl}auth.test`, { method: 'POST', headers: { authorization: `Bearer ${sandbox.botToken}` } });
    expect(raw.status).toBe(200);

    // One post per channel per second: the second at once is refused, another channel is not.
    const { channel } = await slack.conversations.create({ name: 'busy' });
    await slack.chat.postMessage({ channel: channel?.id ?? '', text: 'one' });
    const second = await fetch(`${sandbox.apiUrl}chat.postMessage`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sandbox.botToken}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ channel: channel?.id ?? '', text: 'two' }).toString(),
    });
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toBe('1');
    expect(await second.json()).toEqual({ ok: false, error: 'ratelimited' });
    const calm = await slack.conversations.create({ name: 'calm' });
    await slack.chat.postMessage({ channel: calm.channel?.id ?? '', text: 'elsewhere' });

    // conversations.list is Tier 2: 20 a minute.
    for (let i = 0; i < 20; i += 1) await slack.conversations.list();
    const over = await failure(slack.conversations.list());
    expect(over.code).toBe(ErrorCode.RateLimitedError);
    expect(over.retryAfter).toBeGreaterThan(1);
    expect(over.retryAfter).toBeLessThanOrEqual(60);
  });
});

describe('Slack sandbox: Socket Mode as @slack/socket-mode sees it', () => {
  const sandbox = new SlackSandbox({ postsPerSecondPerChannel: 1_000 });
  const clients: SocketModeClient[] = [];
  /** Slack's own Socket Mode client, given the sandbox's Web API url for apps.connections.open. */
  const socketClient = (autoReconnectEnabled = true): SocketModeClient => {
    const client = new SocketModeClient({ appToken: sandbox.appToken, clientOptions: { slackApiUrl: sandbox.apiUrl }, logLevel: LogLevel.ERROR, autoReconnectEnabled });
    clients.push(client);
    return client;
  };
  beforeAll(() => sandbox.start());
  afterAll(async () => {
    for (const client of clients) await client.disconnect();
    await sandbox.close();
  });

  it('a slash command is acknowledged with an ephemeral reply; people\'s and the bot\'s messages arrive as message events', async () => {
    const client = socketClient();
    const commands: Record<string, unknown>[] = [];
    client.on('slash_commands', async ({ ack, body }: { ack: (r: unknown) => Promise<void>; body: Record<string, unknown> }) => {
      commands.push(body);
      await ack({ response_type: 'ephemeral', text: `paired: ${String(body['text'])}` });
    });
    const events: Record<string, unknown>[] = [];
    client.on('message', async ({ ack, event }: { ack: () => Promise<void>; event: Record<string, unknown> }) => {
      await ack();
      events.push(event);
    });
    expect(sandbox.connected()).toBe(false);
    await expect(sandbox.slash(users.ada, channels.general, '/agent', 'pair 1')).rejects.toThrow(/no app is connected/);
    await client.start();
    expect(sandbox.connected()).toBe(true);
    expect(sandbox.calls('apps.connections.open')).toBe(1);

    const reply = await sandbox.slash(users.ada, channels.general, '/agent', 'pair 123456');
    expect(reply).toEqual({ response_type: 'ephemeral', text: 'paired: pair 123456' });
    expect(commands[0]).toMatchObject({ command: '/agent', text: 'pair 123456', user_id: users.ada, user_name: 'ada', channel_id: channels.general, channel_name: 'general', team_id: SLACK_SANDBOX_IDS.team, api_app_id: SLACK_SANDBOX_IDS.appId });

    // #alerts is not the bot's: nothing arrives from it; #general's message does, in order after it.
    sandbox.say(users.bob, channels.alerts, 'not for the bot');
    const ts = sandbox.say(users.bob, channels.general, 'hi herald');
    await waitFor(() => events.some((e) => e['ts'] === ts), 'the message event');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'message', channel: channels.general, channel_type: 'channel', user: users.bob, text: 'hi herald', ts });
    const posted = await webClient(sandbox).chat.postMessage({ channel: channels.general, text: 'from the bot' });
    await waitFor(() => events.some((e) => e['ts'] === posted.ts), 'the bot\'s own message event');
    expect(events.find((e) => e['ts'] === posted.ts)).toMatchObject({ user: bot.user, bot_id: bot.id });
    await client.disconnect();
    await waitFor(() => !sandbox.connected(), 'the sandbox to see the app go');
  });

  it('a slash command no one acknowledges fails after 3 seconds', async () => {
    const client = socketClient();
    client.on('slash_commands', () => undefined);
    await client.start();
    const started = Date.now();
    await expect(sandbox.slash(users.ada, channels.general, '/agent', 'status')).rejects.toThrow(/did not acknowledge/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_900);
    await client.disconnect();
  });

  it('on close, the app is told to go and no socket stays open', async () => {
    const client = socketClient(false);
    const told: string[] = [];
    client.on('disconnected', () => told.push('disconnected'));
    await client.start();
    await webClient(sandbox).auth.test();
    await sandbox.close();
    await waitFor(() => told.length > 0, 'the client to be disconnected');
    expect(sandbox.connected()).toBe(false);
    const tcp = (): string[] => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap' || r === 'TCPServerWrap');
    await waitFor(() => tcp().length === 0, `no open TCP sockets (still: ${tcp().join(', ')})`, 5_000);
  });
});
