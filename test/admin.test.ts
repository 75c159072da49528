import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from './support/client.js';
import { IDS, newRequestId, post, startTestHerald, TestClock, type TestHerald } from './support/herald.js';

describe('operator endpoints: destination mappings', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
  });
  afterAll(() => h.close());

  it('maps, lists, replaces and removes (guild, destination) → channel', async () => {
    expect((await h.admin.get('/admin/destinations')).json).toEqual({ items: [] });
    const put = await h.admin.put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts });
    expect(put.status).toBe(200);
    expect(put.text).toBe(`{"guild_id":"${IDS.guild}","destination":"alerts","channel_id":"${IDS.channels.alerts}"}`);
    await h.admin.put(`/admin/destinations/${IDS.guild}/ops`, { channel_id: IDS.channels.ops });
    // One channel per (guild, destination): a second PUT replaces the first.
    await h.admin.put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.deals });
    expect((await h.admin.get('/admin/destinations')).json).toEqual({
      items: [
        { guild_id: IDS.guild, destination: 'alerts', channel_id: IDS.channels.deals },
        { guild_id: IDS.guild, destination: 'ops', channel_id: IDS.channels.ops },
      ],
    });
    const del = await h.admin.delete(`/admin/destinations/${IDS.guild}/ops`);
    expect(del.status).toBe(204);
    const again = await h.admin.delete(`/admin/destinations/${IDS.guild}/ops`);
    expect(again.status).toBe(404);
    expect(again.text).toBe('{"error":"mapping not found"}');
  });

  it('asks Discord first: unknown channel, another guild, a voice channel are refused with 422', async () => {
    const cases: [string, string][] = [
      ['999999999999999999', 'channel not found or not visible to the bot'],
      [IDS.otherChannel, 'channel belongs to another guild'],
      [IDS.voiceChannel, 'channel is not a text channel'],
    ];
    for (const [channel, reason] of cases) {
      const res = await h.admin.put(`/admin/destinations/${IDS.guild}/deals`, { channel_id: channel });
      expect(res.status, channel).toBe(422);
      expect(res.text).toBe(JSON.stringify({ error: reason }));
    }
  });

  it('answers 502 when Discord cannot be asked', async () => {
    h.sandbox.inject({ method: 'GET', path: '^/channels/', action: 'error', status: 503, times: 10 });
    const res = await h.admin.put(`/admin/destinations/${IDS.guild}/deals`, { channel_id: IDS.channels.deals });
    h.sandbox.clearFaults();
    expect(res.status).toBe(502);
    expect(res.text).toBe('{"error":"discord unavailable"}');
  });

  it('refuses bad input with clear reasons', async () => {
    const cases: [string, unknown, string][] = [
      [`/admin/destinations/abc/alerts`, { channel_id: IDS.channels.alerts }, 'guild_id must be a snowflake'],
      [`/admin/destinations/${IDS.guild}/general`, { channel_id: IDS.channels.alerts }, 'destination must be one of alerts, deals, digest, ops'],
      [`/admin/destinations/${IDS.guild}/alerts`, { channel_id: 'x' }, 'channel_id must be a snowflake'],
      [`/admin/destinations/${IDS.guild}/alerts`, {}, 'channel_id must be a snowflake'],
      [`/admin/destinations/${IDS.guild}/alerts`, [], 'request body must be an object'],
    ];
    for (const [path, body, reason] of cases) {
      const res = await h.admin.put(path, body);
      expect(res.status, path).toBe(400);
      expect(res.text).toBe(JSON.stringify({ error: reason }));
    }
    const notJson = await h.admin.call('PUT', `/admin/destinations/${IDS.guild}/alerts`, { raw: '{' });
    expect(notJson.text).toBe('{"error":"request body must be valid JSON"}');
  });

  it('needs the admin token', async () => {
    expect((await call(h.url, 'GET', '/admin/destinations')).status).toBe(401);
    expect((await call(h.url, 'PUT', `/admin/destinations/${IDS.guild}/alerts`, { body: { channel_id: IDS.channels.alerts } })).status).toBe(401);
  });

  it('serves Swagger UI and the contract from this server, with no CDN', async () => {
    const page = await (await fetch(`${h.url}/docs`)).text();
    const sources = [...page.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] ?? '');
    expect(sources.length).toBeGreaterThan(2);
    for (const src of sources) {
      expect(src.startsWith('/')).toBe(true);
      expect((await fetch(`${h.url}${src}`)).status, src).toBe(200);
    }
    const spec = await (await fetch(`${h.url}/openapi.yaml`)).text();
    expect(spec).toContain('openapi: 3.1.0');
  });
});

describe('retention', () => {
  const clock = new TestClock();
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ clock });
    await h.mapDestination();
  });
  afterAll(() => h.close());

  it('prunes records older than 8 days by created_at, and keeps younger ones', async () => {
    const old = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(old, `old ${old}`));
    await h.waitForState(old, 'delivered');
    clock.offsetMs = 4 * 24 * 3600_000;
    const young = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(young, `young ${young}`));
    await h.waitForState(young, 'delivered');
    clock.offsetMs = 8 * 24 * 3600_000 - 60_000;
    expect(await h.herald.worker?.prune()).toBe(0);
    expect((await h.bridge.get(`/mcp/deliveries/${old}`)).status).toBe(200);
    clock.offsetMs = 8 * 24 * 3600_000 + 60_000;
    expect(await h.herald.worker?.prune()).toBe(1);
    const gone = await h.bridge.get(`/mcp/deliveries/${old}`);
    expect(gone.status).toBe(404);
    expect(gone.text).toBe('{"error":"unknown request_id"}');
    expect((await h.bridge.get(`/mcp/deliveries/${young}`)).status).toBe(200);
  });
});
