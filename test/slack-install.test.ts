import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POLICY_CLIENT_HEADER } from '../src/infra/http/policy.middleware.js';
import { SealedSecretError, parseCredentialsKey, unseal } from '../src/platforms/slack/credentials.js';
import { SlackSandbox, SLACK_SANDBOX_IDS as ONE, type OtherWorkspace } from '../src/platforms/slack/sandbox/sandbox.js';
import { slack as slackPlatform } from '../src/platforms/slack/index.js';
import { INSTALL_PATH, REDIRECT_PATH } from '../src/platforms/slack/slack-install.js';
import { IDS, newRequestId, startTestHerald, type TestHerald } from './support/herald.js';
import { settledAs, waitFor } from './support/wait.js';

// Slack's OAuth install from Herald (HERALD_SLACK_IDENTITIES `name=install`): black-box over HTTP,
// the whole dance against the Slack sandbox's authorize page and oauth.v2.access, through the real
// @slack/oauth InstallProvider inside Herald.

const POLICY = `
clients:
  agent-ops: { identity: ops }
  agent-eng: { identity: eng }
`;

interface Dance {
  status: number;
  text: string;
  /** Slack's redirect back to Herald (with its code and state), and the state cookie it needs. */
  callback: string;
  cookie: string;
}

describe('installing the Slack app in a workspace from Herald', { timeout: 120_000 }, () => {
  const slack = new SlackSandbox({ tierScale: 10, postsPerSecondPerChannel: 100 });
  const key = randomBytes(32);
  let ops: OtherWorkspace;
  let eng: OtherWorkspace;
  let h: TestHerald;
  let dir: string;
  const as = (client: string) => ({ headers: { [POLICY_CLIENT_HEADER]: client } });
  const settled = (requestId: string, client: string) => settledAs(h.bridge, requestId, client);
  const post = (requestId: string, content: string) => ({ request_id: requestId, kind: 'post', target: { guild_id: IDS.guild, destination: 'digest' }, body: { content } });
  const rows = async (): Promise<Record<string, unknown>[]> => (await sql<Record<string, unknown>>`select * from slack_installations order by identity`.execute(h.herald.store.db)).rows;

  /** An operator starts the install; the person picks `team` on Slack's page; Slack sends them back. */
  const startAndAuthorize = async (identity: string, team: string, herald: TestHerald = h): Promise<Omit<Dance, 'status' | 'text'>> => {
    const start = await fetch(`${herald.url}/slack/install?identity=${identity}`, { headers: { authorization: `Bearer ${herald.adminToken}` }, redirect: 'manual' });
    expect(start.status, await start.clone().text()).toBe(302);
    const authorize = new URL(start.headers.get('location') ?? '');
    expect(`${authorize.origin}${authorize.pathname}`).toBe(slack.authorizeUrl);
    expect(authorize.searchParams.get('client_id')).toBe(slack.clientId);
    const cookie = start.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
    // The installer's binder (no URL carries it) and @slack/oauth's state cookie.
    expect(cookie).toMatch(/^herald-slack-install=[^;]+; slack-app-oauth-state=.+/);
    authorize.searchParams.set('team', team);
    const picked = await fetch(authorize, { redirect: 'manual' });
    expect(picked.status).toBe(302);
    const callback = picked.headers.get('location') ?? '';
    expect(callback.startsWith(`${herald.url}/slack/oauth_redirect?`)).toBe(true);
    return { callback, cookie };
  };
  const finish = async (callback: string, cookie: string): Promise<{ status: number; text: string }> => {
    const res = await fetch(callback, { headers: { cookie }, redirect: 'manual' });
    return { status: res.status, text: await res.text() };
  };
  const dance = async (identity: string, team: string, herald: TestHerald = h): Promise<Dance> => {
    const begun = await startAndAuthorize(identity, team, herald);
    return { ...begun, ...(await finish(begun.callback, begun.cookie)) };
  };

  beforeAll(async () => {
    ops = slack.addWorkspace('ops', { byOAuth: true });
    eng = slack.addWorkspace('eng', { byOAuth: true });
    await slack.start(0, '127.0.0.1');
    dir = await mkdtemp(path.join(tmpdir(), 'herald-slack-install-'));
    const policy = path.join(dir, 'policy.yaml');
    await writeFile(policy, POLICY);
    h = await startTestHerald({
      env: {
        HERALD_POLICY: policy,
        SLACK_BOT_TOKEN: slack.botToken,
        SLACK_API_URL: slack.apiUrl,
        // Socket Mode: the app hears Slack say it was uninstalled from a workspace.
        SLACK_APP_TOKEN: slack.appToken,
        HERALD_SLACK_TIMEOUT_MS: '3000',
        HERALD_SLACK_IDENTITIES: 'ops=install,eng=install',
        SLACK_CLIENT_ID: slack.clientId,
        SLACK_CLIENT_SECRET: slack.clientSecret,
        HERALD_CREDENTIALS_KEY: key.toString('hex'),
      },
    });
    // A channel only a bot Herald has can see may be mapped: before the install, the default's.
    await mapDigest(ONE.channels.general);
  });
  const mapDigest = async (channel: string): Promise<void> => {
    const mapped = await h.admin.put(`/admin/destinations/${IDS.guild}/digest`, { transport: 'slack', channel });
    expect(mapped.status, mapped.text).toBe(200);
  };
  afterAll(async () => {
    await h?.close();
    await slack.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('before the install: the sandbox gives no token, sends fail saying why, and /readyz says so while ready', async () => {
    // The workspace exists, but its bot's token works only once an install handed it over.
    expect(await (await fetch(`${slack.apiUrl}auth.test`, { method: 'POST', headers: { authorization: `Bearer ${ops.botToken}` } })).json()).toEqual({ ok: false, error: 'invalid_auth' });
    const early = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(early, 'too early'), as('agent-ops'))).status).toBe(202);
    expect(await settled(early, 'agent-ops')).toMatchObject({ state: 'failed', code: 'UPSTREAM_UNAVAILABLE' });
    const detail = await h.admin.get(`/admin/deliveries/${early}`);
    expect(detail.text).toContain('the Slack workspace of identity ops is not installed yet');
    const ready = await h.bridge.get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json).toMatchObject({ status: 'ok', identities: { ops: { slack_install: 'not installed' }, eng: { slack_install: 'not installed' } } });
    // The status page says so on each identity's Slack row.
    const page = await (await fetch(`${h.herald.metricsUrl ?? ''}/`)).text();
    expect(page).toMatch(/<tr><td>slack<\/td><td>ops<\/td><td>[^<]*<\/td><td class="down">[^<]*install: not installed<\/td><\/tr>/);
  });

  it('refuses to start an install without the admin token, or for an identity not declared name=install', async () => {
    const url = `${h.url}/slack/install?identity=ops`;
    expect((await fetch(url, { redirect: 'manual' })).status).toBe(401);
    const asBridge = await fetch(url, { headers: { authorization: `Bearer ${h.bridgeToken}` }, redirect: 'manual' });
    expect(asBridge.status).toBe(401);
    expect(asBridge.headers.get('location')).toBeNull();
    for (const identity of ['default', 'nobody', '']) {
      const res = await fetch(`${h.url}/slack/install?identity=${identity}`, { headers: { authorization: `Bearer ${h.adminToken}` }, redirect: 'manual' });
      expect(res.status, identity).toBe(400);
      expect(((await res.json()) as { error: string }).error).toMatch(/identity must name an identity declared name=install/);
    }
    expect(await rows()).toEqual([]);
  });

  it('refuses a bad, missing, foreign or replayed state, and a missing code, storing nothing', async () => {
    const { callback, cookie } = await startAndAuthorize('ops', ops.ids.team);
    const url = new URL(callback);
    const state = url.searchParams.get('state') ?? '';
    const altered = new URL(callback);
    altered.searchParams.set('state', `${state}x`);
    // A state Herald never gave, even with a cookie that matches it.
    expect(await finish(altered.toString(), `slack-app-oauth-state=${state}x`)).toMatchObject({ status: 400, text: expect.stringContaining('state') });
    // Another browser's (no cookie), and no state at all.
    expect((await finish(callback, '')).status).toBe(400);
    const stateless = new URL(callback);
    stateless.searchParams.delete('state');
    expect((await finish(stateless.toString(), cookie)).status).toBe(400);
    const codeless = new URL(callback);
    codeless.searchParams.delete('code');
    expect(await finish(codeless.toString(), cookie)).toMatchObject({ status: 400, text: expect.stringContaining('no code') });
    expect(await rows()).toEqual([]);
  });

  it('installs through the whole dance; the token is sealed at rest; the bot speaks at once, in its workspace', async () => {
    const done = await dance('ops', ops.ids.team);
    expect(done.status, done.text).toBe(200);
    expect(done.text).toContain(`Installed: identity ops now speaks in the Slack workspace ${ops.ids.domain} (${ops.ids.team})`);
    // Replayed (the same redirect and cookie again): the state was good once.
    const replayed = await finish(done.callback, done.cookie);
    expect(replayed.status).toBe(400);
    const [row, ...more] = await rows();
    expect(more).toEqual([]);
    expect(row).toMatchObject({ identity: 'ops', team_id: ops.ids.team, enterprise_id: null, bot_user_id: ops.ids.bot.user, revoked_at: null });
    expect(JSON.stringify(row)).not.toContain('xoxb-');
    expect(JSON.stringify(row)).not.toContain(ops.botToken);
    const sealed = String(row?.['bot_token']);
    expect(unseal(key, sealed, 'ops')).toBe(ops.botToken);
    // Another key, or the row moved to another identity, does not open it.
    expect(() => unseal(randomBytes(32), sealed, 'ops')).toThrow(SealedSecretError);
    expect(() => unseal(key, sealed, 'eng')).toThrow(SealedSecretError);
    await waitFor(async () => !JSON.stringify((await h.bridge.get('/readyz')).json).includes('"ops":{"slack_install"'), '/readyz to drop ops\' not installed');
    await mapDigest(ops.ids.channels.general);
    const after = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(after, 'installed now'), as('agent-ops'))).status).toBe(202);
    expect(await settled(after, 'agent-ops')).toMatchObject({ state: 'delivered' });
    const [message] = slack.messages(ops.ids.channels.general).filter((m) => m.text === 'installed now');
    expect(message?.user).toBe(ops.ids.bot.user);
    expect(slack.messages(ONE.channels.general).map((m) => m.text)).not.toContain('too early');
  });

  it('refuses a second identity for one workspace: the one installed, and SLACK_BOT_TOKEN\'s', async () => {
    for (const team of [ops.ids.team, ONE.team]) {
      const taken = await dance('eng', team);
      expect(taken.status, taken.text).toBe(409);
      expect(taken.text).toContain(`workspace ${team} is already`);
    }
    expect((await rows()).map((r) => r['identity'])).toEqual(['ops']);
    expect(((await h.bridge.get('/readyz')).json as { identities: Record<string, unknown> }).identities['eng']).toEqual({ slack_install: 'not installed' });
    // Its own workspace is fine.
    expect((await dance('eng', eng.ids.team)).status).toBe(200);
    expect((await rows()).map((r) => [r['identity'], r['team_id']])).toEqual([['eng', eng.ids.team], ['ops', ops.ids.team]]);
  });

  it('hears Slack say the app was uninstalled: the identity stops, /readyz says so, and it speaks again once installed again', async () => {
    await waitFor(async () => ((await h.bridge.get('/readyz')).json as { checks?: Record<string, string> }).checks?.['slack_socket'] === 'ok', 'Socket Mode up');
    slack.uninstall('ops');
    await waitFor(async () => (await rows()).find((r) => r['identity'] === 'ops')?.['revoked_at'] !== null, 'the uninstall recorded');
    const ready = await waitFor(async () => {
      const r = await h.bridge.get('/readyz');
      const ops = (r.json as { identities?: Record<string, Record<string, string>> }).identities?.['ops'];
      return ops?.['slack_install']?.startsWith('uninstalled') === true ? r : undefined;
    }, '/readyz to say ops was uninstalled');
    expect(ready.status).toBe(200);
    const refused = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(refused, 'after the uninstall'), as('agent-ops'))).status).toBe(202);
    expect(await settled(refused, 'agent-ops')).toMatchObject({ state: 'failed', code: 'UPSTREAM_UNAVAILABLE' });
    expect((await h.admin.get(`/admin/deliveries/${refused}`)).text).toContain('the Slack workspace of identity ops was uninstalled');
    // Installed again: it speaks at once (this replica read the new install).
    expect((await dance('ops', ops.ids.team)).status).toBe(200);
    const again = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(again, 'installed again'), as('agent-ops'))).status).toBe(202);
    expect(await settled(again, 'agent-ops')).toMatchObject({ state: 'delivered' });
    expect(slack.messages(ops.ids.channels.general).filter((m) => m.text === 'installed again').map((m) => m.user)).toEqual([ops.ids.bot.user]);
  });

  it('stores nothing when Slack refuses Herald\'s client secret', async () => {
    const wrong = await startTestHerald({
      env: { SLACK_BOT_TOKEN: slack.botToken, SLACK_API_URL: slack.apiUrl, HERALD_SLACK_TIMEOUT_MS: '3000', HERALD_SLACK_IDENTITIES: 'ops=install', SLACK_CLIENT_ID: slack.clientId, SLACK_CLIENT_SECRET: 'not-the-secret', HERALD_CREDENTIALS_KEY: key.toString('base64') },
    });
    try {
      const refused = await dance('ops', ops.ids.team, wrong);
      expect(refused.status).toBe(502);
      expect(refused.text).toContain('bad_client_secret');
      expect((await sql`select * from slack_installations`.execute(wrong.herald.store.db)).rows).toEqual([]);
    } finally {
      await wrong.close();
    }
  });
});

describe('HERALD_CREDENTIALS_KEY', () => {
  it('takes 32 bytes as hex or base64, and names the variable otherwise', () => {
    const key = randomBytes(32);
    expect(parseCredentialsKey(key.toString('hex'))).toEqual(key);
    expect(parseCredentialsKey(key.toString('base64'))).toEqual(key);
    expect(parseCredentialsKey(key.toString('base64url'))).toEqual(key);
    for (const bad of ['short', randomBytes(16).toString('hex'), randomBytes(31).toString('base64'), `${key.toString('hex')}00`]) {
      expect(parseCredentialsKey(bad), bad).toEqual({ problem: expect.stringMatching(/^HERALD_CREDENTIALS_KEY must be 32 random bytes/) });
    }
  });
});

describe('the install pages', () => {
  it('are the pages the Slack platform declares (guides and walks read the declaration, src/platforms/slack/index.ts)', () => {
    expect((slackPlatform.pages ?? []).map((p) => `${p.method} ${p.path}`)).toEqual([`GET ${INSTALL_PATH}`, `GET ${REDIRECT_PATH}`]);
  });
});
