import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { PassThrough } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SlackSandbox, type OtherWorkspace } from '../src/platforms/slack/sandbox/sandbox.js';
import { startTestHerald, type TestHerald } from './support/herald.js';
import { installEnv } from './support/slack-install.js';

// The Slack install pages (/slack/install, /slack/oauth_redirect: src/platforms/slack/slack-install.ts), outside the API's contract: each checks its caller and its input itself. The attacking helper's tests, kept; four failed on the code before (no throttle, no count, 401 for an unset admin token, a HEAD that finished an install).

/** A raw GET (no URL normalisation by fetch): path as written. */
function raw(url: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, path, method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the Slack install pages, as a stranger, an agent and a hostile network reach them', { timeout: 120_000 }, () => {
  const slack = new SlackSandbox({ tierScale: 10, postsPerSecondPerChannel: 100 });
  const key = randomBytes(32);
  let ops: OtherWorkspace;
  let h: TestHerald;
  const logs: string[] = [];
  const states = async (): Promise<number> => Number((await sql<{ n: string }>`select count(*) as n from slack_install_states`.execute(h.herald.store.db)).rows[0]?.n);
  const rows = async (): Promise<number> => Number((await sql<{ n: string }>`select count(*) as n from slack_installations`.execute(h.herald.store.db)).rows[0]?.n);

  beforeAll(async () => {
    ops = slack.addWorkspace('ops', { byOAuth: true });
    await slack.start(0, '127.0.0.1');
    const out = new PassThrough();
    out.on('data', (chunk: Buffer) => logs.push(chunk.toString('utf8')));
    h = await startTestHerald({
      logTo: out,
      env: installEnv(slack, 'ops=install', key, { LOG_LEVEL: 'debug' }),
    });
  });
  afterAll(async () => {
    await h?.close();
    await slack.close();
  });

  it('path and header variants without the admin token: never a 302, never a state row', async () => {
    const before = await states();
    const got: Record<string, number> = {};
    const paths = ['/slack/install?identity=ops', '/SLACK/INSTALL?identity=ops', '/slack/install/?identity=ops', '//slack/install?identity=ops', '/slack%2Finstall?identity=ops', '/slack/%69nstall?identity=ops', '/slack/install/..?identity=ops', '/slack/install;x?identity=ops', '/slack/./install?identity=ops', '/admin/../slack/install?identity=ops', '/slack/install?identity=ops&authorization=Bearer%20x', '/slack/install#?identity=ops'];
    const auths: Record<string, string | undefined> = {
      none: undefined,
      empty: '',
      bearerOnly: 'Bearer ',
      bearerSpace: 'Bearer  ',
      bridge: `Bearer ${h.bridgeToken}`,
      lower: `bearer ${h.adminToken}`,
      basic: `Basic ${Buffer.from(`x:${h.adminToken}`).toString('base64')}`,
      prefix: `Bearer ${h.adminToken.slice(0, -1)}`,
      doubleSpace: `Bearer  ${h.adminToken}`,
      extra: `Bearer ${h.adminToken}x`,
      tokenOnly: h.adminToken,
    };
    for (const p of paths) {
      for (const [name, a] of Object.entries(auths)) {
        const r = await raw(h.url, p, a === undefined ? {} : { authorization: a });
        got[`${name} ${p}`] = r.status;
        expect(r.status, `${name} ${p}`).not.toBe(302);
        expect(r.headers['location'], `${name} ${p}`).toBeUndefined();
      }
    }
    expect(await states()).toBe(before);
  });

  it('a stranger guessing the admin token at /slack/install is throttled, as at /admin/ (FailureThrottle: 10 a minute)', async () => {
    const seen: number[] = [];
    for (let i = 0; i < 15; i += 1) seen.push((await raw(h.url, '/slack/install?identity=ops', { authorization: `Bearer ${randomBytes(32).toString('base64url')}` })).status);
    expect(seen.slice(10)).toEqual([429, 429, 429, 429, 429]);
  });

  it('a failed admin-token guess at /slack/install is counted in herald_http_auth_failures_total', async () => {
    const count = async (): Promise<number> => ((await h.herald.registry.getSingleMetric('herald_http_auth_failures_total')?.get())?.values ?? []).reduce((n, v) => n + v.value, 0);
    const before = await count();
    await raw(h.url, '/slack/install?identity=ops', { authorization: 'Bearer nope' });
    expect(await count()).toBe(before + 1);
  });

  it('/admin/slack/install: no longer anything, says so (404 with the admin token, 401 without)', async () => {
    expect((await raw(h.url, '/admin/slack/install?identity=ops', { authorization: `Bearer ${h.adminToken}` })).status).toBe(404);
    expect((await raw(h.url, '/admin/slack/install?identity=ops', { authorization: `Bearer ${h.bridgeToken}` })).status).toBe(404);
  });

  it('redirect input at boundaries: a 4xx naming the field, nothing stored', async () => {
    const before = { states: await states(), rows: await rows() };
    const cases: [string, string][] = [
      ['state', '/slack/oauth_redirect?code=c&state=a%00b'],
      ['state', '/slack/oauth_redirect?code=c&state=a%0D%0AX-Y:%20z'],
      ['state', '/slack/oauth_redirect?code=c&state=%ED%A0%80'],
      ['state', `/slack/oauth_redirect?code=c&state=${'s'.repeat(513)}`],
      ['state', '/slack/oauth_redirect?code=c&state='],
      ['state', '/slack/oauth_redirect?code=c&state=a&state=a'],
      ['state', '/slack/oauth_redirect?code=c&st%61te=a&state=b'],
      ['code', '/slack/oauth_redirect?code=a%00b&state=s'],
      ['code', '/slack/oauth_redirect?code=&state=s'],
      ['code', '/slack/oauth_redirect?state=s'],
      ['code', `/slack/oauth_redirect?code=${'c'.repeat(513)}&state=s`],
      ['code', '/slack/oauth_redirect?code=a&code=b&state=s'],
      ['code', '/slack/oauth_redirect?code=a+b&state=s'],
      ['state', '/slack/oauth_redirect?code=c'],
    ];
    const bad: string[] = [];
    for (const [field, p] of cases) {
      const r = await raw(h.url, p);
      if (r.status < 400 || r.status >= 500 || !r.text.includes(field)) bad.push(`${p} → ${r.status} ${r.text.trim()}`);
      expect(r.headers['x-content-type-options']).toBe('nosniff');
      expect(r.headers['cache-control']).toBe('no-store');
    }
    expect(bad).toEqual([]);
    expect({ states: await states(), rows: await rows() }).toEqual(before);
  });

  it('install identity at boundaries (admin): a 400 naming identity, no state', async () => {
    const before = await states();
    const a = { authorization: `Bearer ${h.adminToken}` };
    for (const q of ['', '?identity=', '?identity=ops%00', '?identity=%ED%A0%80', '?identity=ops%0D%0A', `?identity=${'o'.repeat(600)}`, '?identity=ops&identity=ops', '?Identity=ops', '?identity=OPS', '?identity=ops%20', '?identity[]=ops']) {
      const r = await raw(h.url, `/slack/install${q}`, a);
      expect(r.status, q).toBe(400);
      expect(r.text, q).toMatch(/identity/);
    }
    expect(await states()).toBe(before);
  });

  it('other methods: 405 with Allow, nothing started', async () => {
    const before = await states();
    const a = { authorization: `Bearer ${h.adminToken}` };
    for (const m of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      for (const p of ['/slack/install?identity=ops', '/slack/oauth_redirect?code=c&state=s']) {
        const r = await raw(h.url, p, a, m);
        expect(r.status, `${m} ${p}`).toBe(405);
        expect(r.headers['allow'], `${m} ${p}`).toBe('GET');
      }
    }
    expect(await states()).toBe(before);
  });

  it('a HEAD to the redirect does not finish an install (a safe method writes nothing)', async () => {
    const s = await fetch(`${h.url}/slack/install?identity=ops`, { headers: { authorization: `Bearer ${h.adminToken}` }, redirect: 'manual' });
    const cookie = s.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
    const u = new URL(s.headers.get('location') ?? '');
    u.searchParams.set('team', ops.ids.team);
    const picked = await fetch(u, { redirect: 'manual' });
    const back = new URL(picked.headers.get('location') ?? '');
    const before = await rows();
    const r = await raw(h.url, back.pathname + back.search, { cookie }, 'HEAD');
    expect({ status: r.status, rows: await rows() }).toEqual({ status: 405, rows: before });
  });

  it('no token, secret, code or state in the debug log', async () => {
    const all = logs.join('');
    for (const secret of [slack.clientSecret, h.adminToken, h.bridgeToken, ops.botToken, key.toString('hex')]) expect(all).not.toContain(secret);
    expect(all).not.toMatch(/xoxb-|[?&]code=|[?&]state=|herald-slack-install=/);
  });
});

describe('the Slack install pages where HERALD_ADMIN_TOKEN is unset', { timeout: 120_000 }, () => {
  const slack = new SlackSandbox({ tierScale: 10, postsPerSecondPerChannel: 100 });
  it('an identity name=install without an admin token: refused at start, or /slack/install says the admin token is not configured (503, as /admin/ does)', async () => {
    slack.addWorkspace('ops', { byOAuth: true });
    await slack.start(0, '127.0.0.1');
    let h: TestHerald | undefined;
    try {
      h = await startTestHerald({
        env: {
          HERALD_ADMIN_TOKEN: '',
          HERALD_SLACK_TIMEOUT_MS: '3000',
          SLACK_BOT_TOKEN: slack.botToken,
          SLACK_API_URL: slack.apiUrl,
          HERALD_SLACK_IDENTITIES: 'ops=install',
          SLACK_CLIENT_ID: slack.clientId,
          SLACK_CLIENT_SECRET: slack.clientSecret,
          HERALD_CREDENTIALS_KEY: randomBytes(32).toString('hex'),
        },
      });
    } catch (err) {
      expect(String(err)).toMatch(/HERALD_ADMIN_TOKEN/);
      return;
    } finally {
      if (h === undefined) await slack.close();
    }
    try {
      const admin = await raw(h.url, '/admin/destinations', {});
      const page = await raw(h.url, '/slack/install?identity=ops', { authorization: 'Bearer x' });
      const empty = await raw(h.url, '/slack/install?identity=ops', { authorization: 'Bearer ' });
      expect({ admin: admin.status, page: page.status, empty: empty.status }).toEqual({ admin: 503, page: 503, empty: 503 });
    } finally {
      await h.close();
      await slack.close();
    }
  });
});
