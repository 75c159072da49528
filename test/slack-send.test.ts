import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { deliveryNonce } from '../src/modules/deliveries/delivery.js';
import { SlackSandbox, SLACK_SANDBOX_IDS } from '../src/platforms/slack/sandbox/sandbox.js';
import { startSlackSandbox } from '../src/platforms/slack/slack-sandbox-mode.js';
import { SlackPlatform } from '../src/platforms/slack/slack-platform.js';
import { expectValidResponse } from './support/client.js';
import { IDS, newRequestId, newToken } from './support/herald.js';
import { killRunningProcesses, runHerald } from './support/process.js';
import { slackRig } from './support/rigs.js';
import { waitForStateAt } from './support/wait.js';
import { configProblems } from './support/config-problems.js';

const SLACK = SLACK_SANDBOX_IDS;
/** The destination these tests post to: mapped to the Slack sandbox workspace's #general (the bot is a member). */
const DESTINATION = 'ops';

const post = (requestId: string, content: string): Record<string, unknown> => ({ request_id: requestId, kind: 'post', target: { guild_id: IDS.guild, destination: DESTINATION }, body: { content } });

/**
 * Herald with Discord as home and Slack beside it (a real WebClient against the Slack sandbox),
 * posting through its own HTTP API to a destination mapped to a Slack channel.
 */
describe('sending to Slack', () => {
  const { slack, h } = slackRig({ env: { HERALD_NONCE_WINDOW_MS: '0', HERALD_MAX_ATTEMPTS: '4' }, destination: DESTINATION });

  /** The sandbox's messages in #general that this delivery's key marks. */
  const marked = (requestId: string) => slack.messages(SLACK.channels.general).filter((m) => m.metadata?.event_type === 'herald_delivery' && m.metadata.event_payload['id'] === deliveryNonce(requestId));
  const permalink = (channel: string, ts: string) => `${slack.url}/archives/${channel}/p${ts.replace('.', '')}`;

  it('posts once, marked with its key, mention-inert, and answers the permalink', async () => {
    const id = newRequestId();
    const content = `deploy done <!channel> @here <@${SLACK.users.bob}> ${id.slice(0, 8)}`;
    const accepted = await h.bridge.post('/mcp/deliveries', post(id, content));
    expect(accepted.status).toBe(202);
    const state = await h.waitForState(id, 'delivered');
    await expectValidResponse('GET', '/mcp/deliveries/{request_id}', 200, state);
    const sent = marked(id);
    expect(sent).toHaveLength(1);
    const [message] = sent;
    expect(message?.user).toBe(SLACK.bot.user);
    // Nobody is notified: the broadcast and the user mention are shown escaped, never acted on.
    expect(message?.text).toContain('&lt;!channel&gt;');
    expect(message?.text).not.toContain('<!channel>');
    expect(message?.text).not.toContain(`<@${SLACK.users.bob}>`);
    expect(state['url']).toBe(permalink(SLACK.channels.general, message?.ts ?? ''));
    // The permalink opens in the sandbox, offline.
    const page = await fetch(String(state['url']));
    expect(page.status).toBe(200);
  });

  it('the same request posted twice makes one message', async () => {
    const id = newRequestId();
    const first = await h.bridge.post('/mcp/deliveries', post(id, `twice ${id.slice(0, 8)}`));
    const second = await h.bridge.post('/mcp/deliveries', post(id, `twice ${id.slice(0, 8)}`));
    expect([first.status, second.status].every((s) => s === 200 || s === 202)).toBe(true);
    await h.waitForState(id, 'delivered');
    const third = await h.bridge.post('/mcp/deliveries', post(id, `twice ${id.slice(0, 8)}`));
    expect(third.json).toMatchObject({ existing: true, state: { state: 'delivered' } });
    expect(marked(id)).toHaveLength(1);
  });

  it('a create whose answer is lost is found again by its key in history: delivered, one message', async () => {
    const id = newRequestId();
    const creates = slack.calls('chat.postMessage');
    slack.faults.dropAnswerAfterCreate(1);
    await h.bridge.post('/mcp/deliveries', post(id, `lost answer ${id.slice(0, 8)}`));
    const state = await h.waitForState(id, 'delivered', 45_000);
    const sent = marked(id);
    expect(sent).toHaveLength(1);
    expect(state['url']).toBe(permalink(SLACK.channels.general, sent[0]?.ts ?? ''));
    // Proven from history, never created twice (Slack has no idempotency key).
    expect(slack.calls('chat.postMessage') - creates).toBe(1);
    expect(slack.calls('conversations.history')).toBeGreaterThan(0);
  });

  it('a 5xx that created nothing is looked up, found absent, and sent again: one message', async () => {
    const id = newRequestId();
    const creates = slack.calls('chat.postMessage');
    slack.faults.failNext('chat.postMessage', 500, 1);
    await h.bridge.post('/mcp/deliveries', post(id, `five hundred ${id.slice(0, 8)}`));
    const state = await h.waitForState(id, 'delivered', 45_000);
    const sent = marked(id);
    expect(sent).toHaveLength(1);
    expect(state['url']).toBe(permalink(SLACK.channels.general, sent[0]?.ts ?? ''));
    expect(slack.calls('chat.postMessage') - creates).toBe(2);
  });

  it('a 429 is waited out (Retry-After) and the post goes out once', async () => {
    const id = newRequestId();
    const limited = slack.ratelimited;
    slack.faults.rateLimitNext('chat.postMessage', 1, 1);
    await h.bridge.post('/mcp/deliveries', post(id, `rate limited ${id.slice(0, 8)}`));
    await h.waitForState(id, 'delivered', 20_000);
    expect(slack.ratelimited - limited).toBe(1);
    expect(marked(id)).toHaveLength(1);
  });

  it('an edit applies through chat.update, to the same message', async () => {
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(id, `before edit ${id.slice(0, 8)}`));
    const original = await h.waitForState(id, 'delivered');
    const editId = newRequestId();
    const accepted = await h.bridge.post('/mcp/deliveries', { request_id: editId, kind: 'edit', target: { message_ref: id, seq: 1 }, body: { content: `after edit ${id.slice(0, 8)}` } });
    expect(accepted.status).toBe(202);
    const edit = await h.waitForState(editId, 'delivered');
    expect(edit['applied']).toBe(true);
    expect(edit['url']).toBe(original['url']);
    const sent = marked(id);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.text).toContain(`after edit ${id.slice(0, 8)}`);
    expect(sent[0]?.text).not.toContain('before edit');
    expect(sent[0]?.edited).toBeDefined();
  });

  it("Herald's Slack platform is wired whole: Socket Mode answers a slash command with Herald's router, and the chat tools post on Slack", async () => {
    expect(slack.connected()).toBe(true);
    const ack = await slack.slash(SLACK.users.ada, SLACK.channels.general, '/agent', 'pair 123456');
    // Herald's own command router answered (Ada is not registered), privately.
    expect(ack).toEqual({ response_type: 'ephemeral', text: 'Run `/agent register` first.' });
    const send = await h.bridge.post('/mcp/chat/messages', { channel: 'general', text: 'hello from the chat tools', sender: 'ada', transport: 'slack' });
    expect(send.status, send.text).toBe(202);
    const id = (send.json as { id: string }).id;
    await waitForStateAt(h.bridge, `/mcp/chat/messages/${id}`, 'delivered', 'the chat send');
    const line = slack.messages(SLACK.channels.general).filter((m) => m.text === 'hello from the chat tools');
    expect(line.map((m) => m.username)).toEqual(['ada']);
  });

  it('a public channel the bot is not in is joined, then posted to once', async () => {
    const mapped = await h.admin.put(`/admin/destinations/${IDS.guild}/deals`, { transport: 'slack', channel: SLACK.channels.alerts });
    expect(mapped.status, mapped.text).toBe(200);
    const id = newRequestId();
    const joins = slack.calls('conversations.join');
    await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'deals' }, body: { content: `joined ${id.slice(0, 8)}` } });
    const state = await h.waitForState(id, 'delivered');
    const sent = slack.messages(SLACK.channels.alerts).filter((m) => m.metadata?.event_payload['id'] === deliveryNonce(id));
    expect(sent).toHaveLength(1);
    expect(state['url']).toBe(permalink(SLACK.channels.alerts, sent[0]?.ts ?? ''));
    expect(slack.calls('conversations.join') - joins).toBe(1);
  });

  it('a post to a channel the bot cannot see fails at once, not found', async () => {
    const transport = new SlackPlatform({ token: slack.botToken, apiUrl: slack.apiUrl, timeoutMs: 3_000 });
    await expect(transport.sender?.send('C0NOSUCH001', { content: 'nowhere' }, 'k'.repeat(32), AbortSignal.timeout(5_000))).rejects.toMatchObject({ failure: { kind: 'not_found' } });
    expect(await transport.channels.getChannel('C0NOSUCH001')).toBeUndefined();
    expect(await transport.channels.getChannel(SLACK.channels.general)).toEqual({ id: SLACK.channels.general, guildId: SLACK.team, name: 'general', isText: true });
    expect(transport.channels.check?.('general')).toBe('channel must be a Slack channel id (C…, G… or D…)');
    // A channel whose history cannot be read gives no verdict on a key: undecided, with why.
    const unreadable = await transport.keyed.findByKey('C0NOSUCH001', 'k'.repeat(32), new Date(Date.now() - 60_000), new Date(), AbortSignal.timeout(5_000));
    expect(unreadable).toEqual({ undecided: "the channel's history cannot be read (channel_not_found)" });
  });

  it('a failed create says whether it may have created the message, as the engine needs', async () => {
    const transport = new SlackPlatform({ token: slack.botToken, apiUrl: slack.apiUrl, timeoutMs: 3_000 });
    const send = (content: string, options: { signal?: AbortSignal; deadline?: Date } = {}) =>
      transport.sender.send(SLACK.channels.general, { content }, newRequestId().slice(0, 32), options.signal ?? AbortSignal.timeout(5_000), undefined, options.deadline !== undefined ? { notAfter: options.deadline } : undefined);
    const creates = slack.calls('chat.postMessage');
    // Too long for Slack: refused, nothing created.
    await expect(send('x'.repeat(40_001))).rejects.toMatchObject({ failure: { kind: 'rejected', detail: 'slack msg_too_long on chat.postMessage' } });
    // Past its deadline before it left, or aborted before: it never reaches Slack.
    await expect(send('late', { deadline: new Date(Date.now() - 1_000) })).rejects.toMatchObject({ failure: { kind: 'transient', departedLate: true } });
    const aborted = new AbortController();
    aborted.abort();
    const refused = await send('aborted', { signal: aborted.signal }).catch((err: unknown) => err);
    expect(refused).toMatchObject({ failure: { kind: 'transient' } });
    expect((refused as { failure: { mayHaveCreated?: boolean } }).failure.mayHaveCreated).toBeUndefined();
    expect(slack.calls('chat.postMessage') - creates).toBe(1);
    // A 503 after the request left may have created it; a 429 certainly did not.
    slack.faults.failNext('chat.postMessage', 503, 1);
    await expect(send('503')).rejects.toMatchObject({ failure: { kind: 'transient', mayHaveCreated: true } });
    slack.faults.rateLimitNext('chat.postMessage', 7, 1);
    const limited = await send('429').catch((err: unknown) => err);
    expect(limited).toMatchObject({ failure: { kind: 'transient', retryAfterMs: 7_000 } });
    expect((limited as { failure: { mayHaveCreated?: boolean } }).failure.mayHaveCreated).toBeUndefined();
  });

  it('a DM goes to the channel conversations.open gives; members are listed by name', async () => {
    const transport = new SlackPlatform({ token: slack.botToken, apiUrl: slack.apiUrl, timeoutMs: 3_000 });
    const dm = await transport.dms.openDm(SLACK.users.bob, AbortSignal.timeout(5_000));
    expect(dm).toMatch(/^D/);
    const key = newRequestId().slice(0, 32);
    const sent = await transport.sender.send(dm, { content: 'a direct word' }, key, AbortSignal.timeout(5_000));
    expect(sent.channelId).toBe(dm);
    const there = slack.messages(dm).filter((m) => m.metadata?.event_payload['id'] === key);
    expect(there.map((m) => m.ts)).toEqual([sent.messageId]);
    // And the key finds it, exactly.
    const found = await transport.keyed.findByKey(dm, key, new Date(Date.now() - 60_000), new Date(Date.now() + 60_000), AbortSignal.timeout(5_000));
    expect(found).toEqual({ found: { channelId: dm, messageId: sent.messageId } });
    const absent = await transport.keyed.findByKey(dm, 'x'.repeat(32), new Date(Date.now() - 60_000), new Date(Date.now() + 60_000), AbortSignal.timeout(5_000));
    expect(absent).toEqual({ absent: true });
    // Members by their display names, the bot marked as one.
    const members = await transport.members.listMembers(SLACK.channels.general);
    expect(members.map((m) => [m.userId, m.bot]).sort()).toEqual([[SLACK.bot.user, true], [SLACK.users.ada, false], [SLACK.users.bob, false]].sort());
    expect(members.find((m) => m.userId === SLACK.users.ada)?.displayName).toBe('ada');
  });

  it('a reply in a thread is found by its key in that thread (the channel\'s history lists only the parent)', async () => {
    const transport = new SlackPlatform({ token: slack.botToken, apiUrl: slack.apiUrl, timeoutMs: 3_000 });
    // Slack allows about one post a second in a channel: a 429 is waited out for as long as it says, as Herald does.
    const post = async (message: { content: string; replyTo?: string }, key: string): Promise<{ messageId: string }> => {
      for (;;) {
        try {
          return await transport.sender.send(SLACK.channels.general, message, key, AbortSignal.timeout(5_000));
        } catch (err) {
          const wait = (err as { failure?: { retryAfterMs?: number } }).failure?.retryAfterMs;
          if (wait === undefined) throw err;
          await new Promise((resolve) => setTimeout(resolve, wait));
        }
      }
    };
    const parent = await post({ content: 'the parent' }, newRequestId().slice(0, 32));
    const key = newRequestId().slice(0, 32);
    const reply = await post({ content: 'in the thread', replyTo: parent.messageId }, key);
    const span = [new Date(Date.now() - 60_000), new Date(Date.now() + 60_000)] as const;
    // Read as the channel's history, the reply is not there: a re-drive would have sent it again.
    expect(await transport.keyed.findByKey(SLACK.channels.general, key, ...span, AbortSignal.timeout(5_000))).toEqual({ absent: true });
    expect(await transport.keyed.findByKey(SLACK.channels.general, key, ...span, AbortSignal.timeout(5_000), parent.messageId)).toEqual({ found: { channelId: SLACK.channels.general, messageId: reply.messageId } });
    expect(await transport.keyed.findByKey(SLACK.channels.general, 'x'.repeat(32), ...span, AbortSignal.timeout(5_000), parent.messageId)).toEqual({ absent: true });
  });
});

describe("Slack's sandbox for sandbox mode", () => {
  it('starts a workspace kept in the data folder, and settings Herald sends with', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-slack-mode-'));
    const started = await startSlackSandbox({ dataDir, host: '127.0.0.1', port: 0, core: { leaseMs: 10_000, home: 'discord' } });
    try {
      expect(started.config).toMatchObject({ apiUrl: `${started.url}api/`, timeoutMs: 5_000 });
      expect((await fetch(started.url)).status).toBe(200);
      const transport = new SlackPlatform({ token: started.config.botToken ?? '', apiUrl: started.config.apiUrl, timeoutMs: started.config.timeoutMs });
      const sent = await transport.sender.send(SLACK.channels.general, { content: 'kept' }, 'k'.repeat(32), AbortSignal.timeout(5_000));
      expect(transport.messageUrl('', sent.channelId, sent.messageId)).toBe(`${started.url}archives/${SLACK.channels.general}/p${sent.messageId.replace('.', '')}`);
    } finally {
      await started.close();
    }
    // The workspace is still there after a restart.
    const again = await startSlackSandbox({ dataDir, host: '127.0.0.1', port: 0, core: { leaseMs: 10_000, home: 'discord' } });
    try {
      const transport = new SlackPlatform({ token: again.config.botToken ?? '', apiUrl: again.config.apiUrl, timeoutMs: again.config.timeoutMs });
      const found = await transport.keyed.findByKey(SLACK.channels.general, 'k'.repeat(32), new Date(Date.now() - 60_000), new Date(Date.now() + 60_000), AbortSignal.timeout(5_000));
      expect(found).toHaveProperty('found');
    } finally {
      await again.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe("Slack's settings", () => {
  it('refuses a token of the wrong kind, an API URL without its slash, and an app token alone, naming each', () => {
    const problems = (env: Record<string, string>): string[] => configProblems(env, 'SLACK_');
    expect(problems({ SLACK_BOT_TOKEN: 'xoxp-user-token' })).toEqual(['SLACK_BOT_TOKEN must be a Slack bot token (xoxb-…)']);
    expect(problems({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_APP_TOKEN: 'xoxb-2' })).toEqual(['SLACK_APP_TOKEN must be a Slack app-level token (xapp-…)']);
    expect(problems({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_API_URL: 'https://slack.com/api' })).toEqual(['SLACK_API_URL must be an http(s) URL ending with /']);
    expect(problems({ SLACK_APP_TOKEN: 'xapp-1' })).toEqual(['SLACK_APP_TOKEN is set but SLACK_BOT_TOKEN is not: Slack needs the bot token too']);
    expect(loadConfig({ DISCORD_TOKEN: 'x', SLACK_BOT_TOKEN: 'xoxb-1' }).platforms['slack']).toEqual({ botToken: 'xoxb-1', appToken: undefined, apiUrl: 'https://slack.com/api/', postsPerSecond: 1, timeoutMs: 15_000, identities: [] });
  });
});

describe('Slack at start-up', () => {
  let slack: SlackSandbox;
  let dir: string;
  beforeAll(async () => {
    slack = new SlackSandbox();
    await slack.start(0, '127.0.0.1');
    dir = await mkdtemp(path.join(tmpdir(), 'herald-slack-start-'));
  });
  afterAll(async () => {
    await killRunningProcesses();
    await slack?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('a bot token Slack refuses stops `herald serve` with a sentence for the operator (exit 2), never echoing it', async () => {
    const token = 'xoxb-0000-not-the-sandboxes-token';
    const proc = runHerald(['serve'], {
      HERALD_TRANSPORT: 'memory',
      MCP_BRIDGE_TOKEN: newToken(),
      PORT: '0',
      HERALD_METRICS_PORT: '0',
      HERALD_DATA_DIR: dir,
      SLACK_BOT_TOKEN: token,
      SLACK_API_URL: slack.apiUrl,
    });
    const { code } = await proc.exited;
    expect(code).toBe(2);
    expect(proc.output()).toMatch(/herald: Slack rejected SLACK_BOT_TOKEN \((invalid_auth|not_authed)\): check the bot token/);
    expect(proc.output()).not.toContain(token);
  });
});
