import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { createBridgeClient } from '../src/client/bridge-client.js';
import { client } from './support/client.js';

describe('operators (and connectors, read-only) see what is mapped and why a delivery failed', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
  });
  afterAll(() => h.close());

  it('lists a guild\'s four destinations, mapped or not, to the admin and the bridge token', async () => {
    const unmapped = (d: string, description: string) => ({ destination: d, description, mapped: false });
    const before = await h.admin.get(`/admin/destinations/${IDS.guild}`);
    expect(before.status).toBe(200);
    expect(before.json).toEqual({
      guild_id: IDS.guild,
      destinations: [
        unmapped('alerts', 'Time-sensitive findings and warnings'),
        unmapped('deals', 'Notable deals or opportunities'),
        unmapped('digest', 'Periodic summaries'),
        unmapped('ops', 'Operational status and infrastructure notices'),
      ],
    });
    await h.mapDestination('ops', IDS.channels.ops);
    const after = await h.bridge.get(`/admin/destinations/${IDS.guild}`);
    expect(after.status).toBe(200);
    expect((after.json as { destinations: unknown[] }).destinations[3]).toEqual({
      destination: 'ops',
      description: 'Operational status and infrastructure notices',
      mapped: true,
      channel_id: IDS.channels.ops,
    });
    expect((await h.admin.get('/admin/destinations/12')).json).toEqual({ error: 'guild_id must be a snowflake' });
  });

  it('keeps writing and the full listing to the admin token: the bridge token gets 401 there', async () => {
    expect((await h.bridge.put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts })).json).toEqual({ error: 'unauthorized' });
    expect((await h.bridge.delete(`/admin/destinations/${IDS.guild}/ops`)).status).toBe(401);
    expect((await h.bridge.get('/admin/destinations')).status).toBe(401);
    expect((await client(h.url, 'x'.repeat(43)).get(`/admin/destinations/${IDS.guild}`)).status).toBe(401);
  });

  it('says why a post failed (destination not mapped) without its body, and what a delivered one became', async () => {
    const failed = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(failed, 'secret content', 'digest'));
    await h.waitForState(failed, 'failed');
    const detail = await h.admin.get(`/admin/deliveries/${failed}`);
    expect(detail.status).toBe(200);
    expect(detail.json).toMatchObject({ request_id: failed, kind: 'post', state: 'failed', code: 'UPSTREAM_UNAVAILABLE', reason: 'destination not mapped', attempts: 1 });
    expect(detail.text).not.toContain('secret content');
    expect(Object.keys(detail.json as object)).not.toContain('body');
    // The protocol's own answer is unchanged: only the code.
    expect(Object.keys((await h.bridge.get(`/mcp/deliveries/${failed}`)).json as object)).toEqual(['state', 'kind', 'target', 'body', 'created_at', 'code']);

    await h.mapDestination('alerts', IDS.channels.alerts);
    const ok = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(ok, 'fine'));
    const state = await h.waitForState(ok, 'delivered');
    const sent = h.sandbox.allMessages().find((m) => m.content === 'fine');
    expect((await h.bridge.get(`/admin/deliveries/${ok}`)).json).toMatchObject({
      state: 'delivered',
      attempts: 1,
      transport: 'discord',
      channel_id: IDS.channels.alerts,
      message_id: sent?.id,
      url: state['url'],
      // Not in sandbox mode: people open the message where the protocol's url points.
      link: state['url'],
    });
  });

  it('answers 404 for an unknown or malformed request_id', async () => {
    expect((await h.admin.get(`/admin/deliveries/${'f'.repeat(64)}`)).json).toEqual({ error: 'unknown request_id' });
    expect((await h.admin.get('/admin/deliveries/nope')).json).toEqual({ error: 'not found' });
  });
});

describe('the bridge client asks the read-only admin views once', () => {
  it('does not retry them (a 503 while HERALD_ADMIN_TOKEN is unset must not hold up an answer), but retries the protocol', async () => {
    let calls = 0;
    const fake = async (): Promise<Response> => {
      calls += 1;
      return new Response('{"error":"admin not configured"}', { status: 503, headers: { 'content-type': 'application/json' } });
    };
    const bridge = createBridgeClient({ baseUrl: 'http://127.0.0.1:9', token: 'x'.repeat(43), retries: 2, backoffMs: 1, fetch: fake });
    expect(await bridge.call('getDeliveryDetail', { path: { request_id: 'a'.repeat(64) } }, { once: true })).toEqual({ ok: false, status: 503, error: 'admin not configured' });
    expect(await bridge.call('getGuildDestinations', { path: { guild_id: IDS.guild } }, { once: true })).toEqual({ ok: false, status: 503, error: 'admin not configured' });
    expect(calls).toBe(2);
    await bridge.call('getCapabilities');
    expect(calls).toBe(5);
  });
});
