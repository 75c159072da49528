import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_PAGE } from '../src/platforms/discord/sandbox/page.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

describe('the sandbox control route (POST /sandbox/api/interactions)', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
  });
  afterAll(() => h.close());

  const register = { userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' };
  const control = async (body: string, headers: Record<string, string> = { 'content-type': 'application/json' }) => {
    const res = await fetch(`${h.sandbox.url}/sandbox/api/interactions`, { method: 'POST', headers, body });
    return { status: res.status, type: res.headers.get('content-type'), json: (await res.json()) as Record<string, unknown> };
  };
  /** Herald still answers commands and the API. */
  const stillAlive = async () => {
    const ok = await control(JSON.stringify(register));
    expect(ok.status).toBe(200);
    expect((ok.json['data'] as { content: string }).content).toMatch(/^(Registered\.|Already registered)/);
    expect((await h.bridge.get('/healthz')).status).toBe(200);
  };

  it('refuses the payload that used to crash Herald, sent as a cross-site form would (text/plain)', async () => {
    const res = await control(JSON.stringify({ ...register, permissions: 'xyz' }), { 'content-type': 'text/plain' });
    expect(res).toEqual({ status: 415, type: expect.stringMatching(/^application\/json/), json: { error: 'Content-Type must be application/json' } });
    await stillAlive();
  });

  it.each([
    ['permissions not a number', { ...register, permissions: 'xyz' }, /^permissions must be/],
    ['permissions over 64 bits', { ...register, permissions: '99999999999999999999' }, /^permissions must be/],
    ['permissions a number', { ...register, permissions: 32 }, /^permissions must be/],
    ['an array', [register], /^expected a JSON object/],
    ['null', null, /^expected a JSON object/],
    ['no userId', { ...register, userId: undefined }, /^userId must be/],
    ['numeric userId', { ...register, userId: 123 }, /^userId must be/],
    ['guildId not a snowflake', { ...register, guildId: 'here' }, /^guildId must be/],
    ['channelId not a snowflake', { ...register, channelId: {} }, /^channelId must be/],
    ['command not a name', { ...register, command: 'Agent Register' }, /^command must be/],
    ['subcommand a number', { ...register, subcommand: 1 }, /^subcommand must be/],
    ['options an array', { ...register, options: [] }, /^options must be/],
    ['an option value an object', { ...register, options: { x: {} } }, /^options\.x must be/],
    ['a channel option not a snowflake', { ...register, command: 'destinations', subcommand: 'set', options: { destination: 'ops', channel: 'xyz' } }, /^options\.channel must be a snowflake/],
  ])('%s → 400 with a clear reason, Herald unharmed', async (_name, body, reason) => {
    const res = await control(JSON.stringify(body));
    expect(res.status).toBe(400);
    expect(res.type).toMatch(/^application\/json/);
    expect(res.json['error']).toMatch(reason);
    await stillAlive();
  });

  it('answers a body that is not JSON with 400, an oversized one with 413', async () => {
    expect(await control('{"userId":')).toMatchObject({ status: 400, json: { error: 'request body must be valid JSON' } });
    expect(await control('x'.repeat(200_000))).toMatchObject({ status: 413, json: { error: 'request body too large' } });
    await stillAlive();
  });

  it('refuses requests from another site: a foreign Origin or Sec-Fetch-Site', async () => {
    const json = { 'content-type': 'application/json' };
    for (const headers of [
      { ...json, origin: 'https://evil.example' },
      { ...json, origin: 'null' },
      { ...json, 'sec-fetch-site': 'cross-site' },
      { ...json, 'sec-fetch-site': 'same-site' },
    ]) {
      expect(await control(JSON.stringify(register), headers)).toMatchObject({ status: 403, json: { error: 'cross-origin requests are refused' } });
    }
  });

  it("keeps the sandbox page's own form working: same origin, JSON", async () => {
    expect(SANDBOX_PAGE).toContain("fetch('/sandbox/api/interactions', { method: 'POST', headers: { 'Content-Type': 'application/json' }");
    // What the form sends from the page: the sandbox's own origin, and the browser's Sec-Fetch-Site.
    const res = await control(JSON.stringify({ userId: IDS.user, command: 'agent', subcommand: 'register', options: {}, guildId: IDS.guild, permissions: '0' }), {
      'content-type': 'application/json',
      origin: h.sandbox.url,
      'sec-fetch-site': 'same-origin',
    });
    expect(res.status).toBe(200);
  });

  it('survives a gateway event discord.js cannot handle: it is logged and dropped, later events are answered', async () => {
    // Straight to the gateway, past the control route's checks: only Herald's own guard is left.
    await expect(h.sandbox.invoke({ ...register, permissions: 'xyz' }, 1_500)).rejects.toThrow('the bot did not answer the interaction');
    await stillAlive();
  });
});

describe('the sandbox under hostile input (found by npm run fuzz)', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.gatewaySessions > 0, 'Herald on the gateway');
  });
  afterAll(() => h.close());

  const alive = async () => expect((await fetch(`${h.sandbox.url}/sandbox/api/state`)).status).toBe(200);

  it('closes a gateway session that sends null or an IDENTIFY without data, and keeps serving', async () => {
    const { WebSocket } = await import('ws');
    for (const frame of ['null', '{"op":2,"d":null}', '[1]', '"x"']) {
      const ws = new WebSocket(`${h.sandbox.url.replace('http', 'ws')}/gateway`);
      const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
      ws.once('message', () => ws.send(frame));
      expect([4002, 4004]).toContain(await closed);
    }
    await alive();
    expect(h.sandbox.gatewaySessions).toBeGreaterThan(0);
  });

  it('answers a malformed %-escape anywhere with 404 JSON, not a 500', async () => {
    for (const path of ['/sandbox/%E0', '/api/v10/channels/%', '/sandbox/a%']) {
      const res = await fetch(`${h.sandbox.url}${path}`, { method: 'DELETE', headers: { authorization: `Bot ${h.sandbox.botToken}` } });
      expect(res.status, path).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    }
    await alive();
  });

  it('refuses a fault it could not apply (a bad regular expression would break every later request)', async () => {
    for (const fault of [{ action: 'error', path: '(' }, { action: 'explode' }, { action: 'delay', ms: -1 }, { action: 'error', status: 42 }, [1]]) {
      const res = await fetch(`${h.sandbox.url}/sandbox/api/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(fault) });
      expect(res.status, JSON.stringify(fault)).toBe(400);
    }
    // Discord calls still work.
    const channel = await fetch(`${h.sandbox.apiUrl}/v10/channels/${IDS.channels.alerts}`, { headers: { authorization: `Bot ${h.sandbox.botToken}` } });
    expect(channel.status).toBe(200);
  });

  it('answers a history query with a non-snowflake cursor 400, not a 500', async () => {
    const res = await fetch(`${h.sandbox.apiUrl}/v10/channels/${IDS.channels.alerts}/messages?after=abc`, { headers: { authorization: `Bot ${h.sandbox.botToken}` } });
    expect(res.status).toBe(400);
  });
});
