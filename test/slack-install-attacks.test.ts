import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POLICY_CLIENT_HEADER } from '../src/infra/http/policy.middleware.js';
import { SlackSandbox, type OtherWorkspace } from '../src/platforms/slack/sandbox/sandbox.js';
import { SealedSecretError, seal, unseal } from '../src/platforms/slack/credentials.js';
import { SlackInstallations } from '../src/platforms/slack/slack-installations.js';
import { IDS, newRequestId, startTestHerald, type TestHerald } from './support/herald.js';
import { finishInstall, installDance, installEnv, pickWorkspace, startInstall } from './support/slack-install.js';
import { settledAs } from './support/wait.js';

// Attacks on Slack's OAuth install from Herald (src/platforms/slack/slack-install.ts), each kept
// as a test: odd inputs, races for a state or a workspace, a stranger who saw the state (old code:
// installed their workspace), sealed rows tampered with, secrets in the log, and re-installing an
// identity into another workspace (old code: it kept speaking with the first workspace's token).

const POLICY = `
clients:
  agent-ops: { identity: ops }
  agent-eng: { identity: eng }
`;

describe('attacking the Slack install', { timeout: 120_000 }, () => {
  const slack = new SlackSandbox({ tierScale: 10, postsPerSecondPerChannel: 100 });
  const key = randomBytes(32);
  let ops: OtherWorkspace;
  let eng: OtherWorkspace;
  let spare: OtherWorkspace;
  let h: TestHerald;
  let dir: string;
  const logs: string[] = [];
  const rows = async (): Promise<Record<string, unknown>[]> => (await sql<Record<string, unknown>>`select * from slack_installations order by identity`.execute(h.herald.store.db)).rows;
  const states = async (): Promise<number> => Number((await sql<{ n: string }>`select count(*) as n from slack_install_states`.execute(h.herald.store.db)).rows[0]?.n);
  const start = (identity: string) => startInstall(h, identity);
  const dance = (identity: string, team: string) => installDance(h, identity, team);
  beforeAll(async () => {
    ops = slack.addWorkspace('ops', { byOAuth: true });
    eng = slack.addWorkspace('eng', { byOAuth: true });
    spare = slack.addWorkspace('spare', { byOAuth: true });
    await slack.start(0, '127.0.0.1');
    dir = await mkdtemp(path.join(tmpdir(), 'herald-attack-slack-install-'));
    const policy = path.join(dir, 'policy.yaml');
    await writeFile(policy, POLICY);
    const out = new PassThrough();
    out.on('data', (chunk: Buffer) => logs.push(chunk.toString('utf8')));
    h = await startTestHerald({
      logTo: out,
      env: installEnv(slack, 'ops=install,eng=install', key, { LOG_LEVEL: 'debug', HERALD_POLICY: policy }),
    });
  });
  afterAll(async () => {
    await h?.close();
    await slack.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('odd methods, paths and parameters: a clear 4xx, no state row, nothing stored', async () => {
    const admin = { authorization: `Bearer ${h.adminToken}` };
    const got: Record<string, number> = {};
    for (const [label, url, init] of [
      ['POST install', `${h.url}/slack/install?identity=ops`, { method: 'POST', headers: admin }],
      ['PUT redirect', `${h.url}/slack/oauth_redirect?code=x&state=y`, { method: 'PUT' }],
      ['DELETE redirect', `${h.url}/slack/oauth_redirect?code=x&state=y`, { method: 'DELETE' }],
      ['identity twice', `${h.url}/slack/install?identity=ops&identity=ops`, { headers: admin }],
      ['identity odd', `${h.url}/slack/install?identity=${encodeURIComponent('ops\r\nX: y')}`, { headers: admin }],
      ['identity long', `${h.url}/slack/install?identity=${'a'.repeat(5000)}`, { headers: admin }],
      ['upper-case path, no token', `${h.url}/SLACK/install?identity=ops`, {}],
      ['upper-case path, bridge token', `${h.url}/SLACK/install?identity=ops`, { headers: { authorization: `Bearer ${h.bridgeToken}` } }],
      ['trailing slash, no token', `${h.url}/slack/install/?identity=ops`, {}],
      ['long state', `${h.url}/slack/oauth_redirect?code=c&state=${'s'.repeat(8000)}`, { headers: { cookie: `slack-app-oauth-state=${'s'.repeat(8000)}` } }],
      ['no query', `${h.url}/slack/oauth_redirect`, {}],
      ['state twice', `${h.url}/slack/oauth_redirect?code=c&state=a&state=b`, { headers: { cookie: 'slack-app-oauth-state=a' } }],
      ['error=access_denied', `${h.url}/slack/oauth_redirect?error=access_denied&state=a`, {}],
    ] as const) {
      const res = await fetch(url, { ...(init as RequestInit), redirect: 'manual' });
      got[label] = res.status;
      expect(res.headers.get('location'), label).toBeNull();
    }
    expect(got).toEqual({
      'POST install': 405,
      'PUT redirect': 405,
      'DELETE redirect': 405,
      'identity twice': 400,
      'identity odd': 400,
      'identity long': 400,
      'upper-case path, no token': 401,
      'upper-case path, bridge token': 401,
      'trailing slash, no token': 401,
      'long state': 400,
      'no query': 400,
      'state twice': 400,
      'error=access_denied': 403,
    });
    // HEAD with the admin token: does it make a state (and set a cookie) like GET?
    const head = await fetch(`${h.url}/slack/install?identity=ops`, { method: 'HEAD', headers: admin, redirect: 'manual' });
    expect([302, 405]).toContain(head.status);
    expect(await rows()).toEqual([]);
  });

  it('two callbacks racing for one state: exactly one is stored', async () => {
    const s = await start('ops');
    const callback = await pickWorkspace(s.authorize, ops.ids.team);
    // The same code can be exchanged once only at Slack; give the racer its own code for the same state.
    const other = await pickWorkspace(s.authorize, spare.ids.team);
    const [a, b] = await Promise.all([finishInstall(callback, s.cookie), finishInstall(other, s.cookie)]);
    expect([a.status, b.status].sort()).toEqual([200, 400]);
    expect((await rows()).map((r) => r['identity'])).toEqual(['ops']);
  });

  it('two identities racing for one workspace: one holds it, the other is refused', async () => {
    await sql`delete from slack_installations`.execute(h.herald.store.db);
    const [a, b] = await Promise.all([dance('eng', spare.ids.team), dance('ops', spare.ids.team)]);
    expect([a.status, b.status].sort(), `${a.text} / ${b.text}`).toEqual([200, 409]);
    expect((await rows()).map((r) => r['team_id'])).toEqual([spare.ids.team]);
    await sql`delete from slack_installations`.execute(h.herald.store.db);
  });

  it('a stranger who only saw the authorize URL (not the admin browser\'s cookie) cannot finish the install with their own workspace', async () => {
    // The operator starts an install for eng and opens Slack's authorize page (its URL carries the state).
    const { authorize: leaked } = await start('eng');
    const state = leaked.searchParams.get('state') ?? '';
    // A stranger gets a code for a workspace of their own.
    const theirs = slack.addWorkspace(`stranger-${randomBytes(3).toString('hex')}`, { byOAuth: true });
    const callback = await pickWorkspace(leaked, theirs.ids.team);
    // …and sends Herald the state with a cookie they wrote themselves: the cookie is the state.
    const res = await finishInstall(callback, `slack-app-oauth-state=${state}`);
    expect(res.status, res.text).toBe(400);
    expect((await rows()).map((r) => r['team_id'])).not.toContain(theirs.ids.team);
  });

  it('no token, client secret, code or state in the debug log', async () => {
    const all = logs.join('');
    expect(all.length).toBeGreaterThan(0);
    for (const secret of [slack.clientSecret, ops.botToken, eng.botToken, spare.botToken, key.toString('hex')]) expect(all).not.toContain(secret);
    expect(all).not.toMatch(/xoxb-/);
    expect(all).not.toMatch(/slack-app-oauth-state=|[?&]code=|[?&]state=/);
    expect(await states()).toBeGreaterThanOrEqual(0);
  });
});

describe('re-installing an identity into another workspace', { timeout: 120_000 }, () => {
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
  const mapDigest = async (channel: string): Promise<void> => {
    const mapped = await h.admin.put(`/admin/destinations/${IDS.guild}/digest`, { transport: 'slack', channel });
    expect(mapped.status, mapped.text).toBe(200);
  };
  const dance = (identity: string, team: string) => installDance(h, identity, team);

  beforeAll(async () => {
    ops = slack.addWorkspace('ops', { byOAuth: true });
    eng = slack.addWorkspace('eng', { byOAuth: true });
    await slack.start(0, '127.0.0.1');
    dir = await mkdtemp(path.join(tmpdir(), 'herald-attack-slack-reinstall-'));
    const policy = path.join(dir, 'policy.yaml');
    await writeFile(policy, POLICY);
    h = await startTestHerald({
      env: installEnv(slack, 'ops=install,eng=install', key, { HERALD_POLICY: policy }),
    });
  });
  afterAll(async () => {
    await h?.close();
    await slack.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('re-installing ops into another workspace: its sends go to the new workspace, not the old one', async () => {
    // ops first installed (by mistake) in the eng workspace…
    const first = await dance('ops', eng.ids.team);
    expect(first.status, first.text).toBe(200);
    await mapDigest(eng.ids.channels.general);
    const a = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(a, 'ops in eng'), as('agent-ops'))).status).toBe(202);
    expect(await settled(a, 'agent-ops')).toMatchObject({ state: 'delivered' });
    // …then installed again, in its own workspace: the page says so and the row says so.
    const again = await dance('ops', ops.ids.team);
    expect(again.status, again.text).toBe(200);
    expect(again.text).toContain(`(${ops.ids.team})`);
    expect((await rows()).find((r) => r['identity'] === 'ops')).toMatchObject({ team_id: ops.ids.team });
    // The eng workspace is free now, and eng installs it.
    const engs = await dance('eng', eng.ids.team);
    expect(engs.status, engs.text).toBe(200);
    // ops posts to the eng workspace's channel: it must no longer reach it (ops is not in eng any more).
    const b = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(b, 'ops after reinstall, into eng'), as('agent-ops'))).status).toBe(202);
    await settled(b, 'agent-ops');
    expect(slack.messages(eng.ids.channels.general).map((m) => m.text)).not.toContain('ops after reinstall, into eng');
    // And into its own workspace it is delivered, from its bot there.
    await mapDigest(ops.ids.channels.general);
    const c = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(c, 'ops after reinstall'), as('agent-ops'))).status).toBe(202);
    expect(await settled(c, 'agent-ops')).toMatchObject({ state: 'delivered' });
  });


  it('a sealed row moved to another identity, truncated or altered: a clean SealedSecretError', async () => {
    const db = h.herald.store.db;
    const before = await rows();
    expect(before.map((r) => r['identity'])).toEqual(['eng', 'ops']);
    const [engRow, opsRow] = before;
    await sql`update slack_installations set bot_token = ${String(opsRow?.['bot_token'])} where identity = 'eng'`.execute(db);
    await sql`update slack_installations set bot_token = ${String(engRow?.['bot_token'])} where identity = 'ops'`.execute(db);
    const installations = new SlackInstallations(db as never, key);
    await expect(installations.find('eng')).rejects.toBeInstanceOf(SealedSecretError);
    const sealed = seal(key, 'xoxb-1', 'ops');
    for (const bad of ['', 'v1:', 'v1:AAAA', sealed.slice(0, -4), `${sealed.slice(0, -2)}A=`, `v2:${sealed.slice(3)}`, 'v1:!!!!', `v1:${'A'.repeat(10_000)}`]) expect(() => unseal(key, bad, 'ops'), bad).toThrow(SealedSecretError);
  });
});
