import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import type { SlackConfig } from '../src/platforms/slack/index.js';
import { checkToken } from '../src/platforms/slack/slack.plugin.js';
import { POLICY_CLIENT_HEADER } from '../src/infra/http/policy.middleware.js';
import { SlackSandbox, SLACK_SANDBOX_IDS as ONE, type OtherWorkspace } from '../src/platforms/slack/sandbox/sandbox.js';
import { SlackPlatform } from '../src/platforms/slack/slack-platform.js';
import { IDS, newRequestId, startTestHerald, type TestHerald } from './support/herald.js';
import { settledAs } from './support/wait.js';
import { configProblems } from './support/config-problems.js';
import { apiCall } from './support/slack-sandbox.js';

// Several Slack workspaces in one Herald (HERALD_SLACK_IDENTITIES): the app installed in each, its
// bot there speaking for the agents the operator's policy binds to that identity. Black-box over
// HTTP against the Slack sandbox, through @slack/web-api.


describe('the Slack sandbox with the app in a second workspace', () => {
  const sandbox = new SlackSandbox({ postsPerSecondPerChannel: 100 });
  let two: OtherWorkspace;
  beforeAll(async () => {
    two = sandbox.addWorkspace('ops');
    await sandbox.start(0, '127.0.0.1');
  });
  afterAll(() => sandbox.close());

  it('answers each bot token as its own workspace: its team, its bot, its channels and people only', async () => {
    expect(two.ids.team).not.toBe(ONE.team);
    expect(await apiCall(sandbox, two.botToken, 'auth.test', {})).toMatchObject({ ok: true, team_id: two.ids.team, user_id: two.ids.bot.user, bot_id: two.ids.bot.id, url: `${sandbox.url}/${two.ids.team}/` });
    expect(await apiCall(sandbox, sandbox.botToken, 'auth.test', {})).toMatchObject({ ok: true, team_id: ONE.team, user_id: ONE.bot.user });
    // Each bot reaches its own workspace's channels and people, never the other's.
    expect(await apiCall(sandbox, two.botToken, 'chat.postMessage', { channel: two.ids.channels.general, text: 'in two' })).toMatchObject({ ok: true, channel: two.ids.channels.general });
    expect(await apiCall(sandbox, two.botToken, 'chat.postMessage', { channel: ONE.channels.general, text: 'across' })).toEqual({ ok: false, error: 'channel_not_found' });
    expect(await apiCall(sandbox, sandbox.botToken, 'chat.postMessage', { channel: two.ids.channels.general, text: 'across' })).toEqual({ ok: false, error: 'channel_not_found' });
    expect(await apiCall(sandbox, two.botToken, 'users.info', { user: ONE.users.ada })).toEqual({ ok: false, error: 'user_not_found' });
    expect(await apiCall(sandbox, two.botToken, 'users.info', { user: two.ids.users.ada })).toMatchObject({ ok: true, user: { id: two.ids.users.ada, team_id: two.ids.team } });
    // A DM the second bot opens is in its workspace, with an id no other workspace gives.
    const dm = await apiCall(sandbox, two.botToken, 'chat.postMessage', { channel: two.ids.users.bob, text: 'hello bob' });
    expect(dm).toMatchObject({ ok: true });
    expect(String(dm['channel'])).toMatch(/^DW02[0-9]{7}$/);
    expect(sandbox.messages(String(dm['channel'])).map((m) => m.text)).toEqual(['hello bob']);
    expect(sandbox.messages(two.ids.channels.general).map((m) => m.text)).toEqual(['in two']);
    expect(sandbox.messages(ONE.channels.general)).toEqual([]);
    // Its page: read-only, under its team id.
    const page = await fetch(`${sandbox.url}/${two.ids.team}/`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain(`(${two.ids.team})`);
    expect(html).toContain('in two');
    expect(html).not.toContain('<form');
    expect(() => sandbox.addWorkspace('ops')).toThrow(/already has a workspace named ops/);
  });

  it('refuses a token it never issued, whichever workspace it pretends to be', async () => {
    expect(await apiCall(sandbox, `${two.botToken}x`, 'auth.test', {})).toEqual({ ok: false, error: 'invalid_auth' });
    expect(await apiCall(sandbox, sandbox.appToken, 'chat.postMessage', { channel: two.ids.channels.general, text: 'x' })).toEqual({ ok: false, error: 'not_allowed_token_type' });
  });

  it('gives a permalink in the second workspace that its page serves', async () => {
    const transport = new SlackPlatform({ token: two.botToken, apiUrl: sandbox.apiUrl, timeoutMs: 5_000 });
    const sent = await transport.sender.send(two.ids.channels.general, { content: 'linked' }, 'l'.repeat(32), AbortSignal.timeout(5_000));
    const url = transport.messageUrl('', sent.channelId, sent.messageId);
    expect(url).toBe(`${sandbox.url}/${two.ids.team}/archives/${two.ids.channels.general}/p${sent.messageId.replace('.', '')}`);
    const page = await fetch(url);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('linked');
  });
});

describe('HERALD_SLACK_IDENTITIES', () => {
  const problems = (env: Record<string, string>): string[] => configProblems(env, 'SLACK_');

  it('reads each workspace bot token from where it says, and names every mistake', () => {
    const slack = loadConfig({ DISCORD_TOKEN: 'x', SLACK_BOT_TOKEN: 'xoxb-1', HERALD_SLACK_IDENTITIES: 'ops=env:OPS_SLACK, support=env:SUPPORT_SLACK', OPS_SLACK: 'xoxb-2', SUPPORT_SLACK: ' xoxb-3\n' }).platforms['slack'] as SlackConfig;
    expect(slack.identities).toEqual([{ name: 'ops', token: 'xoxb-2' }, { name: 'support', token: 'xoxb-3' }]);
    expect(problems({ SLACK_BOT_TOKEN: 'xoxb-1', HERALD_SLACK_IDENTITIES: 'ops=env:OPS_SLACK', OPS_SLACK: 'xapp-1-abc' })).toEqual(['HERALD_SLACK_IDENTITIES: identity ops: not a Slack bot token (xoxb-…)']);
    expect(problems({ SLACK_BOT_TOKEN: 'xoxb-1', HERALD_SLACK_IDENTITIES: 'ops=env:OPS_SLACK', OPS_SLACK: 'xoxb-1' })).toEqual(['HERALD_SLACK_IDENTITIES: identity ops has the token of SLACK_BOT_TOKEN: each identity is a workspace of its own (start-up also asks Slack which workspace each token is for)']);
    expect(problems({ SLACK_BOT_TOKEN: 'xoxb-1', HERALD_SLACK_IDENTITIES: 'ops' })).toEqual(['HERALD_SLACK_IDENTITIES: identity ops needs its bot token (xoxb-…) (ops=env:VARIABLE or ops=file:/path)']);
    expect(problems({ SLACK_BOT_TOKEN: 'xoxb-1', HERALD_SLACK_IDENTITIES: 'ops=env:OPS_SLACK' })).toEqual(['HERALD_SLACK_IDENTITIES: identity ops: OPS_SLACK is unset or empty']);
    expect(problems({ SLACK_BOT_TOKEN: 'xoxb-1', HERALD_SLACK_IDENTITIES: 'default=env:X' })).toEqual(['HERALD_SLACK_IDENTITIES: "default" is the identity the platform\'s own variables configure; name the others differently']);
    expect(problems({ HERALD_SLACK_IDENTITIES: 'ops=env:OPS_SLACK', OPS_SLACK: 'xoxb-2' })).toEqual(['HERALD_SLACK_IDENTITIES: identity ops names a token, but SLACK_BOT_TOKEN is unset (sandbox mode makes its workspaces: give bare names)']);
  });

  it('refuses to start with bare names outside sandbox mode, and with a token Slack refuses, naming the identity', async () => {
    const log = pino({ level: 'silent' });
    const bare = loadConfig({ DISCORD_TOKEN: 'x', HERALD_SLACK_IDENTITIES: 'ops' }).platforms['slack'] as SlackConfig;
    await expect(checkToken(bare, log)).rejects.toThrow('HERALD_SLACK_IDENTITIES names workspaces for sandbox mode (bare names), but Herald is not in sandbox mode');
    const sandbox = new SlackSandbox();
    await sandbox.start(0, '127.0.0.1');
    try {
      const twice = loadConfig({ DISCORD_TOKEN: 'x', SLACK_BOT_TOKEN: sandbox.botToken, SLACK_API_URL: sandbox.apiUrl, HERALD_SLACK_IDENTITIES: 'ops=env:OPS_SLACK', OPS_SLACK: `${sandbox.botToken}-again` }).platforms['slack'] as SlackConfig;
      // A second token the sandbox does not know is refused by Slack itself, naming the identity.
      await expect(checkToken(twice, log)).rejects.toThrow("Slack rejected identity ops's token (HERALD_SLACK_IDENTITIES) (invalid_auth)");
      const other = sandbox.addWorkspace('ops');
      const fine = loadConfig({ DISCORD_TOKEN: 'x', SLACK_BOT_TOKEN: sandbox.botToken, SLACK_API_URL: sandbox.apiUrl, HERALD_SLACK_IDENTITIES: 'ops=env:OPS_SLACK', OPS_SLACK: other.botToken }).platforms['slack'] as SlackConfig;
      await expect(checkToken(fine, log)).resolves.toBeUndefined();
    } finally {
      await sandbox.close();
    }
  });
});

const POLICY = `
clients:
  agent-ops: { identity: ops }
  agent-main: { identity: default }
`;

describe('two Slack workspaces, two agents, each speaking only in its own', { timeout: 120_000 }, () => {
  const slack = new SlackSandbox({ tierScale: 10, postsPerSecondPerChannel: 100 });
  let two: OtherWorkspace;
  let h: TestHerald;
  let dir: string;
  const as = (client: string) => ({ headers: { [POLICY_CLIENT_HEADER]: client } });
  const settled = (requestId: string, client: string) => settledAs(h.bridge, requestId, client);
  const slackPost = (requestId: string, destination: string, content: string) => ({ request_id: requestId, kind: 'post', target: { guild_id: IDS.guild, destination }, body: { content } });
  const textsIn = (channel: string) => slack.messages(channel).map((m) => m.text);

  beforeAll(async () => {
    two = slack.addWorkspace('ops');
    await slack.start(0, '127.0.0.1');
    dir = await mkdtemp(path.join(tmpdir(), 'herald-slack-identities-'));
    const policy = path.join(dir, 'policy.yaml');
    await writeFile(policy, POLICY);
    h = await startTestHerald({
      env: { HERALD_POLICY: policy, SLACK_BOT_TOKEN: slack.botToken, SLACK_API_URL: slack.apiUrl, HERALD_SLACK_TIMEOUT_MS: '3000', HERALD_SLACK_IDENTITIES: 'ops=env:OPS_SLACK_TOKEN', OPS_SLACK_TOKEN: two.botToken },
    });
    for (const [destination, channel] of [['deals', ONE.channels.general], ['digest', two.ids.channels.general]] as const) {
      const mapped = await h.admin.put(`/admin/destinations/${IDS.guild}/${destination}`, { transport: 'slack', channel });
      expect(mapped.status, mapped.text).toBe(200);
    }
  });
  afterAll(async () => {
    await h?.close();
    await slack.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('posts as the workspace bot the agent is bound to, in that workspace', async () => {
    const ops = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', slackPost(ops, 'digest', 'from the ops agent'), as('agent-ops'))).status).toBe(202);
    const state = await settled(ops, 'agent-ops');
    expect(state).toMatchObject({ state: 'delivered' });
    const [message] = slack.messages(two.ids.channels.general).filter((m) => m.text === 'from the ops agent');
    expect(message?.user).toBe(two.ids.bot.user);
    expect(state['url']).toBe(`${slack.url}/${two.ids.team}/archives/${two.ids.channels.general}/p${message?.ts.replace('.', '')}`);
    const main = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', slackPost(main, 'deals', 'from the main agent'), as('agent-main'))).status).toBe(202);
    expect(await settled(main, 'agent-main')).toMatchObject({ state: 'delivered' });
    expect(slack.messages(ONE.channels.general).find((m) => m.text === 'from the main agent')?.user).toBe(ONE.bot.user);
  });

  it("refuses an agent reaching into the other workspace: its bot cannot see the channel, and nothing is sent there", async () => {
    const intoMain = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', slackPost(intoMain, 'deals', 'ops into main'), as('agent-ops'))).status).toBe(202);
    // Failed as any post to a channel its bot cannot see (Slack's channel_not_found), never sent as the other bot.
    expect(await settled(intoMain, 'agent-ops')).toMatchObject({ state: 'failed', code: 'UPSTREAM_UNAVAILABLE' });
    const intoOps = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', slackPost(intoOps, 'digest', 'main into ops'), as('agent-main'))).status).toBe(202);
    expect(await settled(intoOps, 'agent-main')).toMatchObject({ state: 'failed', code: 'UPSTREAM_UNAVAILABLE' });
    expect([...textsIn(ONE.channels.general), ...textsIn(two.ids.channels.general)]).not.toContain('ops into main');
    expect([...textsIn(ONE.channels.general), ...textsIn(two.ids.channels.general)]).not.toContain('main into ops');
  });

  it('a workspace that uninstalled the app stops only its own identity, said under its name on /readyz', async () => {
    const before = await h.bridge.get('/readyz');
    expect(before.status).toBe(200);
    expect(JSON.stringify(before.json)).not.toContain('slack_token');
    slack.uninstall('ops');
    const refused = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', slackPost(refused, 'digest', 'after the uninstall'), as('agent-ops'))).status).toBe(202);
    expect(await settled(refused, 'agent-ops')).toMatchObject({ state: 'failed' });
    expect(textsIn(two.ids.channels.general)).not.toContain('after the uninstall');
    const after = await h.bridge.get('/readyz');
    expect(after.status).toBe(200);
    expect(after.json).toMatchObject({ status: 'ok', identities: { ops: { slack_token: 'rejected by Slack (token_revoked)' } } });
    expect((after.json as { checks: Record<string, string> }).checks).not.toHaveProperty('slack_token');
    // The default workspace's agent goes on.
    const main = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', slackPost(main, 'deals', 'still here'), as('agent-main'))).status).toBe(202);
    expect(await settled(main, 'agent-main')).toMatchObject({ state: 'delivered' });
  });
});
