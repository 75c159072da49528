import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POLICY_CLIENT_HEADER } from '../src/infra/http/policy.middleware.js';
import { unseal } from '../src/platforms/slack/credentials.js';
import { SlackInstallations, type SlackInstallDb } from '../src/platforms/slack/slack-installations.js';
import { SlackSandbox, type OtherWorkspace } from '../src/platforms/slack/sandbox/sandbox.js';
import { IDS, newRequestId, startTestHerald, type TestHerald } from './support/herald.js';
import { installDance, installEnv } from './support/slack-install.js';
import { waitFor } from './support/wait.js';

// Slack's token rotation (an app setting): an install hands over an access token that expires
// (12 h on Slack, 2 s here) and a refresh token that is good once. Herald refreshes the token once
// half its life is over, one replica at a time (src/platforms/slack/slack.plugin.ts, InstalledBot),
// keeps the new pair sealed, and the bot speaks on with the new token: no delivery ever meets an
// expired one. Before: the install kept the first token, and the identity went dead when it expired.

const LIFETIME_MS = 2_000;

describe('an installed workspace whose tokens rotate', { timeout: 60_000 }, () => {
  const slack = new SlackSandbox({ tierScale: 10, postsPerSecondPerChannel: 100 });
  const key = randomBytes(32);
  let rot: OtherWorkspace;
  let h: TestHerald;
  let dir: string;
  const as = { headers: { [POLICY_CLIENT_HEADER]: 'agent-rot' } };
  const row = async (): Promise<Record<string, unknown>> => (await sql<Record<string, unknown>>`select * from slack_installations where identity = 'rot'`.execute(h.herald.store.db)).rows[0] ?? {};
  const tokenNow = async (): Promise<string> => unseal(key, String((await row())['bot_token']), 'rot');
  const postAndSettle = async (content: string): Promise<Record<string, unknown>> => {
    const id = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'digest' }, body: { content } }, as)).status).toBe(202);
    return waitFor(async () => {
      const state = (await h.bridge.get(`/mcp/deliveries/${id}`, as)).json as Record<string, unknown>;
      return ['delivered', 'failed', 'unknown'].includes(String(state['state'])) ? state : undefined;
    }, `"${content}" to settle`);
  };
  const authTest = async (token: string): Promise<unknown> => (await fetch(`${slack.apiUrl}auth.test`, { method: 'POST', headers: { authorization: `Bearer ${token}` } })).json();

  beforeAll(async () => {
    rot = slack.addWorkspace('rot', { byOAuth: true, rotatingMs: LIFETIME_MS });
    await slack.start(0, '127.0.0.1');
    dir = await mkdtemp(path.join(tmpdir(), 'herald-slack-rotation-'));
    const policy = path.join(dir, 'policy.yaml');
    await writeFile(policy, 'clients:\n  agent-rot: { identity: rot }\n');
    h = await startTestHerald({
      env: installEnv(slack, 'rot=install', key, { HERALD_POLICY: policy }),
    });
    // Installed through the dance: start (admin), pick the workspace, back with both cookies.
    const installed = await installDance(h, 'rot', rot.ids.team);
    expect(installed.status, installed.text).toBe(200);
    const mapped = await h.admin.put(`/admin/destinations/${IDS.guild}/digest`, { transport: 'slack', channel: rot.ids.channels.general });
    expect(mapped.status, mapped.text).toBe(200);
  });
  afterAll(async () => {
    await h?.close();
    await slack.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('refreshes the token before it expires, keeps the new pair sealed, and speaks on with it', async () => {
    const first = await tokenNow();
    expect(first).toMatch(/^xoxe\.xoxb-/);
    const installed = await row();
    expect(installed['refresh_token']).not.toBeNull();
    expect(JSON.stringify(installed)).not.toMatch(/xoxe/);
    expect(await postAndSettle('with the first token')).toMatchObject({ state: 'delivered' });
    // Sending on, the token is refreshed once half its life is over.
    const second = await waitFor(async () => {
      expect(await postAndSettle(`sending on ${Date.now()}`)).toMatchObject({ state: 'delivered' });
      const now = await tokenNow();
      return now !== first ? now : undefined;
    }, 'the token to be refreshed');
    expect(second).toMatch(/^xoxe\.xoxb-/);
    expect(JSON.stringify(await row())).not.toMatch(/xoxe/);
    // The first token expires on Slack; the bot speaks with the second.
    await waitFor(async () => ((await authTest(first)) as { error?: string }).error === 'token_expired', 'the first token to expire');
    expect(await postAndSettle('after the first token expired')).toMatchObject({ state: 'delivered' });
    const texts = slack.messages(rot.ids.channels.general).map((m) => [m.text, m.user]);
    expect(texts).toContainEqual(['after the first token expired', rot.ids.bot.user]);
    // Refreshed about once per half-life, not on every read.
    expect(slack.calls('oauth.v2.access')).toBeLessThan(20);
  });

  it('keeps a refresh only into the install it was taken for: not over one made again meanwhile (old code: overwrote it)', async () => {
    const installations = new SlackInstallations(h.herald.store.db as unknown as Kysely<SlackInstallDb>, key);
    const taken = await waitFor(async () => installations.takeRefresh('rot', 30_000), 'the refresh to be free');
    // Installed again (a new token) while the refresh was on its way.
    await installations.store('rot', { teamId: rot.ids.team, enterpriseId: undefined, botUserId: rot.ids.bot.user, botToken: 'xoxb-installed-again', refreshToken: undefined, expiresAt: undefined }, new Date(Date.now() + 1_000));
    const kept = await installations.refreshed('rot', taken, { botToken: 'xoxe.xoxb-the-old-install-refreshed', refreshToken: 'xoxe-1-old', expiresAt: new Date(Date.now() + 60_000) }, new Date());
    expect(kept).toBe(false);
    expect((await installations.find('rot'))?.token).toBe('xoxb-installed-again');
  });
});
