import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { POLICY_CLIENT_HEADER } from '../src/infra/http/policy.middleware.js';
import { unseal } from '../src/platforms/slack/credentials.js';
import { SlackSandbox, type OtherWorkspace } from '../src/platforms/slack/sandbox/sandbox.js';
import { SlackInstallations } from '../src/platforms/slack/slack-installations.js';
import { IDS, newRequestId, startTestHerald, type TestHerald } from './support/herald.js';
import { installEnv, pickWorkspace, startInstall } from './support/slack-install.js';
import { waitFor } from './support/wait.js';

describe('the Slack install under races: a repeated state, late refreshes, a refresh lease held elsewhere, an uninstall heard elsewhere', { timeout: 120_000 }, () => {
  const slack = new SlackSandbox({ tierScale: 10, postsPerSecondPerChannel: 100 });
  const key = randomBytes(32);
  let ops: OtherWorkspace;
  let eng: OtherWorkspace;
  let evil: OtherWorkspace;
  let rot: OtherWorkspace;
  let h: TestHerald;
  let dir: string;
  const logs: string[] = [];
  const row = async (identity: string): Promise<Record<string, unknown> | undefined> => (await sql<Record<string, unknown>>`select * from slack_installations where identity = ${identity}`.execute(h.herald.store.db)).rows[0];
  const start = (identity: string) => startInstall(h, identity);
  const authorize = pickWorkspace;
  beforeAll(async () => {
    ops = slack.addWorkspace('ops', { byOAuth: true });
    eng = slack.addWorkspace('eng', { byOAuth: true });
    evil = slack.addWorkspace('evil', { byOAuth: true });
    rot = slack.addWorkspace('rot', { byOAuth: true, rotatingMs: 600_000 });
    await slack.start(0, '127.0.0.1');
    dir = await mkdtemp(path.join(tmpdir(), 'herald-attack3-'));
    const policy = path.join(dir, 'policy.yaml');
    await writeFile(policy, 'clients:\n  agent-ops: { identity: ops }\n  agent-rot: { identity: rot }\n');
    const out = new PassThrough();
    out.on('data', (chunk: Buffer) => logs.push(chunk.toString('utf8')));
    h = await startTestHerald({
      logTo: out,
      env: installEnv(slack, 'ops=install,eng=install,rot=install', key, { LOG_LEVEL: 'debug', HERALD_POLICY: policy }),
    });
  });
  afterAll(async () => {
    await h?.close();
    await slack.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('a stranger who saw the state cannot finish the install without the binder cookie, even with state given twice', async () => {
    // The admin starts an install of ops; the stranger sees the state (Slack's URLs) but not the binder.
    const s = await start('ops');
    const state = s.authorize.searchParams.get('state') ?? '';
    expect(state).not.toBe('');
    // The stranger authorizes their own workspace with that state, and comes back with the state twice:
    // Koa's ctx.query.state is then an array (Herald's binder check skipped), @slack/oauth reads the first.
    const callback = new URL(await authorize(s.authorize, evil.ids.team));
    callback.searchParams.append('state', state);
    const res = await fetch(callback, { headers: { cookie: `slack-app-oauth-state=${state}` }, redirect: 'manual' });
    const text = await res.text();
    expect({ status: res.status, stored: (await row('ops'))?.['team_id'] }, text).toEqual({ status: 400, stored: undefined });
  });

  it('a refresh that finishes after the identity was installed again does not overwrite the new install', async () => {
    const installations = new SlackInstallations(h.herald.store.db as never, key);
    const t0 = new Date();
    await installations.store('eng', { teamId: ops.ids.team + 'X', enterpriseId: undefined, botUserId: 'UOLD', botToken: 'xoxe.xoxb-old', refreshToken: 'xoxe-1-old', expiresAt: new Date(t0.getTime() + 1000) }, t0);
    // Replica A takes the refresh of the old install; its call to Slack is slow...
    const taken = await installations.takeRefresh('eng', 30_000);
    expect(taken).toMatchObject({ refreshToken: 'xoxe-1-old' });
    // ...meanwhile the identity is installed again (another workspace, a new pair)...
    await installations.store('eng', { teamId: eng.ids.team, enterpriseId: undefined, botUserId: eng.ids.bot.user, botToken: 'xoxb-NEW', refreshToken: undefined, expiresAt: undefined }, new Date());
    // ...and A's refresh of the OLD workspace's token lands.
    expect(await installations.refreshed('eng', taken ?? { installedAt: new Date(0), until: new Date(0) }, { botToken: 'xoxe.xoxb-old-refreshed', refreshToken: 'xoxe-1-old-2', expiresAt: new Date(Date.now() + 3_600_000) }, new Date())).toBe(false);
    const found = await installations.find('eng');
    expect({ team: found?.teamId, token: found?.token }).toEqual({ team: eng.ids.team, token: 'xoxb-NEW' });
  });

  it('a refresh that lands after an uninstall and re-install does not resurrect the old token', async () => {
    const installations = new SlackInstallations(h.herald.store.db as never, key);
    await sql`delete from slack_installations where identity = 'eng'`.execute(h.herald.store.db);
    await installations.store('eng', { teamId: 'TOLD2', enterpriseId: undefined, botUserId: 'UOLD', botToken: 'xoxe.xoxb-old', refreshToken: 'xoxe-1-old', expiresAt: new Date(Date.now() + 1000) }, new Date());
    const taken = await installations.takeRefresh('eng', 30_000);
    expect(taken).toMatchObject({ refreshToken: 'xoxe-1-old' });
    expect(await installations.revokeTeam('TOLD2', new Date())).toEqual(['eng']);
    await installations.store('eng', { teamId: eng.ids.team, enterpriseId: undefined, botUserId: eng.ids.bot.user, botToken: 'xoxb-NEW2', refreshToken: 'xoxe-1-new', expiresAt: new Date(Date.now() + 3_600_000) }, new Date());
    expect(await installations.refreshed('eng', taken ?? { installedAt: new Date(0), until: new Date(0) }, { botToken: 'xoxe.xoxb-old-refreshed', refreshToken: 'xoxe-1-old-2', expiresAt: new Date(Date.now() + 3_600_000) }, new Date())).toBe(false);
    expect((await installations.find('eng'))?.token).toBe('xoxb-NEW2');
    // The new install's own refresh token is kept too.
    const r = await row('eng');
    expect(unseal(key, String(r?.['refresh_token']), 'eng:refresh')).toBe('xoxe-1-new');
  });

  it('while another replica holds the refresh lease, sends do not read the store on every send', async () => {
    // Install rot (rotating tokens, 600 s life).
    const s = await start('rot');
    const back = await fetch(await authorize(s.authorize, rot.ids.team), { headers: { cookie: s.cookie }, redirect: 'manual' });
    expect(back.status, await back.text()).toBe(200);
    const mapped = await h.admin.put(`/admin/destinations/${IDS.guild}/digest`, { transport: 'slack', channel: rot.ids.channels.general });
    expect(mapped.status, mapped.text).toBe(200);
    const as = { headers: { [POLICY_CLIENT_HEADER]: 'agent-rot' } };
    const post = async (content: string): Promise<Record<string, unknown>> => {
      const id = newRequestId();
      expect((await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'digest' }, body: { content } }, as)).status).toBe(202);
      return waitFor(async () => {
        const st = (await h.bridge.get(`/mcp/deliveries/${id}`, as)).json as Record<string, unknown>;
        return ['delivered', 'failed', 'unknown'].includes(String(st['state'])) ? st : undefined;
      }, `"${content}" to settle`);
    };
    expect(await post('first')).toMatchObject({ state: 'delivered' });
    // Past half its life (issued 400 s ago), and another replica is refreshing it (its lease 10 min long: a slow Slack, or a clock ahead).
    await sql`update slack_installations set token_issued_at = now() - interval '400 seconds', token_expires_at = now() + interval '200 seconds', refreshing_until = now() + interval '10 minutes' where identity = 'rot'`.execute(h.herald.store.db);
    const find = vi.spyOn(SlackInstallations.prototype, 'find');
    const take = vi.spyOn(SlackInstallations.prototype, 'takeRefresh');
    // Sending on until the bot reads its install again and finds it due, with the refresh held elsewhere.
    await waitFor(async () => {
      expect(await post(`until due ${Date.now()}`)).toMatchObject({ state: 'delivered' });
      return take.mock.calls.length > 0 ? true : undefined;
    }, 'the bot to find its token due');
    find.mockClear();
    take.mockClear();
    for (let i = 0; i < 10; i++) expect(await post(`storm ${i}`)).toMatchObject({ state: 'delivered' });
    const counts = { find: find.mock.calls.length, takeRefresh: take.mock.calls.length };
    find.mockRestore();
    take.mockRestore();
    // At most a read per INSTALL_REREAD_MS (the 10 sends take well under 5 s... allow 3).
    expect(counts.find + counts.takeRefresh, JSON.stringify(counts)).toBeLessThanOrEqual(6);
  });

  it('an uninstall heard by another replica reaches this replica\'s /readyz without a send', async () => {
    // rot is installed and has spoken (the test before). Another replica heard app_uninstalled and revoked it in the store.
    const installations = new SlackInstallations(h.herald.store.db as never, key);
    expect(await installations.revokeTeam(rot.ids.team, new Date())).toEqual(['rot']);
    await waitFor(async () => {
      const ids = ((await h.bridge.get('/readyz')).json as { identities?: Record<string, Record<string, string>> }).identities ?? {};
      return ids['rot']?.['slack_install']?.startsWith('uninstalled') === true ? true : undefined;
    }, '/readyz to say rot was uninstalled', 15_000);
  });

  it('no token, refresh token or binder in a debug log', () => {
    const all = logs.join('');
    expect(all).not.toMatch(/xox[a-z]-|xoxe/);
    expect(all).not.toMatch(/herald-slack-install=/);
  });
});
