import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SocketModeClient } from '@slack/socket-mode';
import { LogLevel } from '@slack/web-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SLACK_SANDBOX_IDS, SlackSandbox } from '../src/platforms/slack/sandbox/sandbox.js';
import { failure, herald, webClient } from './support/slack-sandbox.js';
import { waitFor } from './support/wait.js';

const { channels, users, bot } = SLACK_SANDBOX_IDS;

describe('Slack sandbox: the page and the state file', () => {
  let folder: string;
  const sandboxes: SlackSandbox[] = [];
  const started = async (stateFile: string): Promise<SlackSandbox> => {
    const sandbox = new SlackSandbox({ stateFile, postsPerSecondPerChannel: 1_000 });
    sandboxes.push(sandbox);
    await sandbox.start();
    return sandbox;
  };
  beforeAll(async () => {
    folder = await mkdtemp(path.join(tmpdir(), 'slack-sandbox-'));
  });
  afterAll(async () => {
    for (const sandbox of sandboxes) await sandbox.close();
    await rm(folder, { recursive: true, force: true });
  });

  it('shows channels and DMs with their messages, newest last, who sent them and under which username; a permalink opens one', async () => {
    const sandbox = await started(path.join(folder, 'page.json'));
    const slack = webClient(sandbox);
    sandbox.say(users.ada, channels.general, 'first, from Ada');
    const posted = await slack.chat.postMessage({ channel: channels.general, text: 'second <script>alert(1)</script> &amp; <https://example.com/x|a link>', username: 'Deploy Bot' });
    const dm = await slack.conversations.open({ users: users.bob });
    await slack.chat.postMessage({ channel: dm.channel?.id ?? '', text: 'just for Bob' });

    const page = await fetch(`${sandbox.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = await page.text();
    expect(html).not.toContain('<script');
    expect(html).toContain('#general');
    expect(html).toContain('#alerts');
    expect(html).toContain('DM with Bob Builder');
    expect(html).toContain('just for Bob');
    const first = html.indexOf('first, from Ada');
    const second = html.indexOf('second &lt;script&gt;alert(1)&lt;/script&gt; &amp; <a href="https://example.com/x" rel="noopener noreferrer">a link</a>');
    expect(first).toBeGreaterThan(0);
    expect(second).toBeGreaterThan(first);
    expect(html).toContain('Ada Lovelace');
    expect(html).toContain('Herald</span> <span class="as">as “Deploy Bot”</span>');

    const { permalink } = await slack.chat.getPermalink({ channel: channels.general, message_ts: posted.ts ?? '' });
    const one = await fetch(permalink ?? '');
    expect(one.status).toBe(200);
    const oneHtml = await one.text();
    expect(oneHtml).toContain('Deploy Bot');
    expect(oneHtml).not.toContain('first, from Ada');
    expect((await fetch(`${sandbox.url}/archives/${channels.general}/p1000000000000001`)).status).toBe(404);
  });

  it('keeps the workspace in the state file across restarts', async () => {
    const file = path.join(folder, 'kept.json');
    const before = await started(file);
    const slack = webClient(before);
    const created = await slack.conversations.create({ name: 'kept' });
    const id = created.channel?.id ?? '';
    const posted = await slack.chat.postMessage({ channel: id, text: 'remember me', metadata: herald('k-kept') });
    await slack.conversations.join({ channel: channels.alerts });
    await before.close();

    const after = await started(file);
    const again = webClient(after);
    expect(after.messages(id)).toEqual([expect.objectContaining({ ts: posted.ts, text: 'remember me', metadata: herald('k-kept') })]);
    expect((await again.conversations.info({ channel: channels.alerts })).channel?.is_member).toBe(true);
    expect(await failure(again.conversations.create({ name: 'kept' }))).toMatchObject({ error: 'name_taken' });
    const later = await again.chat.postMessage({ channel: id, text: 'and me' });
    expect(Number(later.ts)).toBeGreaterThan(Number(posted.ts));
    const created2 = await again.conversations.create({ name: 'kept-two' });
    expect(created2.channel?.id).not.toBe(id);
  });
});

describe('Slack sandbox: what people do (DMs, replies through response_url, the page\'s forms, reconnects)', () => {
  const sandbox = new SlackSandbox({ postsPerSecondPerChannel: 1_000 });
  let client: SocketModeClient;
  const events: Record<string, unknown>[] = [];
  let responseUrl = '';
  beforeAll(async () => {
    await sandbox.start();
    // A short ping timeout makes the client reconnect 1 s after a refresh, not 5 s.
    client = new SocketModeClient({ appToken: sandbox.appToken, clientOptions: { slackApiUrl: sandbox.apiUrl }, logLevel: LogLevel.ERROR, clientPingTimeout: 1_000 });
    client.on('message', async ({ ack, event }: { ack: () => Promise<void>; event: Record<string, unknown> }) => {
      await ack();
      events.push(event);
    });
    client.on('slash_commands', async ({ ack, body }: { ack: (r: unknown) => Promise<void>; body: Record<string, unknown> }) => {
      responseUrl = String(body['response_url']);
      await ack(body['text'] === 'later' ? {} : { response_type: 'ephemeral', text: `you said ${String(body['text'])}` });
    });
    await client.start();
  });
  afterAll(async () => {
    await client.disconnect();
    await sandbox.close();
  });

  it('a person writes to the bot in their DM (the bot user id names it): a message event from an im', async () => {
    const ts = sandbox.say(users.bob, bot.user, 'hello bot');
    await waitFor(() => events.find((e) => e['ts'] === ts), 'the DM message event');
    const event = events.find((e) => e['ts'] === ts);
    expect(event).toMatchObject({ channel_type: 'im', user: users.bob, text: 'hello bot' });
    const dm = (await webClient(sandbox).conversations.open({ users: users.bob })).channel?.id;
    expect(event?.['channel']).toBe(dm);
  });

  it('a later reply through response_url: ephemeral is kept for the person, in_channel is posted by the bot', async () => {
    expect(await sandbox.slash(users.ada, channels.general, '/agent', 'later')).toEqual({});
    expect(responseUrl.startsWith(`${sandbox.url}/commands/`)).toBe(true);
    const post = (body: unknown): Promise<Response> => fetch(responseUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await post({ text: 'done, privately' })).status).toBe(200);
    expect((await post({ response_type: 'in_channel', text: 'done, for all' })).status).toBe(200);
    expect(sandbox.commandReplies().map((r) => [r.user, r.command, r.response_type, r.text])).toEqual([
      [users.ada, '/agent', 'ephemeral', 'done, privately'],
      [users.ada, '/agent', 'in_channel', 'done, for all'],
    ]);
    expect(sandbox.messages(channels.general).map((m) => m.text)).toContain('done, for all');
    expect(sandbox.messages(channels.general).map((m) => m.text)).not.toContain('done, privately');
    expect((await fetch(`${sandbox.url}/commands/${SLACK_SANDBOX_IDS.team}/nope`, { method: 'POST' })).status).toBe(404);
  });

  it('the page\'s forms write a message and run a command; another site cannot', async () => {
    const form = (fields: Record<string, string>): RequestInit => ({ method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields).toString() });
    const sent = await fetch(`${sandbox.url}/sandbox/say`, form({ user: users.ada, channel: channels.general, text: 'typed in the page' }));
    expect(sent.status).toBe(303);
    expect(sandbox.messages(channels.general).at(-1)).toMatchObject({ user: users.ada, text: 'typed in the page' });
    const ran = await fetch(`${sandbox.url}/sandbox/slash`, form({ user: users.bob, channel: channels.general, command: '/agent pair 123456' }));
    expect(ran.status).toBe(200);
    expect(await ran.text()).toContain('Only visible to you: you said pair 123456');
    const foreign = await fetch(`${sandbox.url}/sandbox/say`, { ...form({ user: users.ada, channel: channels.general, text: 'forged' }), headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' } });
    expect(foreign.status).toBe(403);
    expect(sandbox.messages(channels.general).map((m) => m.text)).not.toContain('forged');
  });

  it('asked to refresh, the app reconnects with a new connection', async () => {
    const opened = sandbox.calls('apps.connections.open');
    sandbox.refreshConnections();
    await waitFor(() => sandbox.calls('apps.connections.open') > opened && sandbox.connected(), 'the app to reconnect', 15_000);
    expect(await sandbox.slash(users.ada, channels.general, '/agent', 'again')).toEqual({ response_type: 'ephemeral', text: 'you said again' });
  });
});
