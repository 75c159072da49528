import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { deliveryNonce } from '../src/modules/deliveries/delivery.js';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/**
 * A create that may have reached Discord unanswered keeps the delivery in doubt, across retries
 * and connector resets, until Discord's nonce or the channel's history settles it
 * (docs/guides/how-it-works.md). Herald trusts no nonce here (HERALD_NONCE_WINDOW_MS=0), so every settlement is by history.
 */
describe('deliveries in doubt', () => {
  let h: TestHerald;
  beforeAll(async () => {
    // A Discord that remembers nonces for a second: long enough to answer discord.js's own quick
    // retries of one request, too short to save a later attempt.
    h = await startTestHerald({
      sandbox: { nonceWindowMs: 1_000 },
      env: { HERALD_NONCE_WINDOW_MS: '0', HERALD_MAX_ATTEMPTS: '2', HERALD_DISCORD_TIMEOUT_MS: '15000', HERALD_LEASE_MS: '30000' },
    });
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
    await h.mapDestination('alerts', IDS.channels.alerts);
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
  });
  afterAll(() => h.close());
  beforeEach(() => h.sandbox.clearFaults());

  const withContent = (content: string) => h.sandbox.allMessages().filter((m) => m.content === content);
  const urlOf = (channelId: string, messageId: string | undefined) => `https://discord.com/channels/${IDS.guild}/${channelId}/${messageId}`;

  it('created but answered 5xx, history unreadable: the nonce the gateway reported settles it, one message', async () => {
    const id = newRequestId();
    const content = `reported ${id}`;
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error_after_create', status: 500 });
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 500, times: 2 });
    h.sandbox.inject({ method: 'GET', path: '/messages$', action: 'error', status: 500, times: 1_000 });
    await h.bridge.post('/mcp/deliveries', post(id, content));
    const state = await h.waitForState(id, 'delivered', 30_000);
    const sent = withContent(content);
    expect(sent).toHaveLength(1);
    expect(state['url']).toBe(urlOf(IDS.channels.alerts, sent[0]?.id));
  });

  it('a refusal after a lost create is no verdict: delivered once, never failed', async () => {
    const id = newRequestId();
    const content = `retried ${id}`;
    // The first try creates the message behind a 502; the next (the engine's, in doubt) is refused for good.
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error_after_create', status: 502 });
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 403, code: 50001 });
    await h.bridge.post('/mcp/deliveries', post(id, content));
    const state = await h.waitForState(id, 'delivered', 30_000);
    const sent = withContent(content);
    expect(sent).toHaveLength(1);
    expect(state['url']).toBe(urlOf(IDS.channels.alerts, sent[0]?.id));
  });

  it("twins both in doubt are told apart by the nonce the gateway reported for each message: no deadlock, no guess", async () => {
    const a = newRequestId();
    const b = newRequestId();
    const content = `twins ${a.slice(0, 8)}`;
    const creates = () => h.sandbox.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/messages')).length;
    // A is created behind a 500 (discord.js does not repeat a create: the engine takes it from there, in doubt).
    const before = creates();
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error_after_create', status: 500 });
    await h.bridge.post('/mcp/deliveries', post(a, content));
    await waitFor(() => creates() === before + 1, "A's create");
    // B gets a 500 and creates nothing, but cannot know that.
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 500, times: 1 });
    await h.bridge.post('/mcp/deliveries', post(b, content));
    const stateA = await h.waitForState(a, 'delivered', 30_000);
    const stateB = await h.waitForState(b, 'delivered', 30_000);
    const sent = withContent(content);
    expect(sent).toHaveLength(2);
    for (const [id, state] of [[a, stateA], [b, stateB]] as const) {
      const own = sent.find((m) => m.nonce === deliveryNonce(id));
      expect(state['url']).toBe(urlOf(IDS.channels.alerts, own?.id));
    }
  });

  it('does not reconcile after an attempt that never reached the create (opening the DM failed)', async () => {
    const id = newRequestId();
    const content = `unreached ${id}`;
    // Opening the DM channel fails (discord.js tries 3 times); history would fail if read.
    h.sandbox.inject({ method: 'POST', path: '/users/@me/channels$', action: 'error', status: 500, times: 3 });
    h.sandbox.inject({ method: 'GET', path: '/messages$', action: 'error', status: 500, times: 1_000 });
    const before = h.sandbox.requests.length;
    await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'dm', target: { user_id: IDS.user }, body: { content } });
    await h.waitForState(id, 'delivered', 30_000);
    expect(withContent(content)).toHaveLength(1);
    expect(h.sandbox.requests.slice(before).filter((r) => r.method === 'GET' && r.path.endsWith('/messages'))).toEqual([]);
  });

  it('out of attempts after 5xx answers that created nothing: a look at the channel before the resend, one after the last create, then failed UPSTREAM_UNAVAILABLE', async () => {
    const id = newRequestId();
    const content = `never ${id}`;
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 503, times: 1_000 });
    const before = h.sandbox.requests.length;
    await h.bridge.post('/mcp/deliveries', post(id, content));
    const state = await h.waitForState(id, 'failed', 40_000);
    expect(state['code']).toBe('UPSTREAM_UNAVAILABLE');
    expect(withContent(content)).toHaveLength(0);
    // Two attempts, each one create (discord.js does not repeat a create: the engine decides). No
    // nonce is trusted, so the channel is read before the resend, and the last claim only looks: one
    // read after the last create.
    const creates = 'POST 503';
    const seen = h.sandbox.requests.slice(before).filter((r) => r.path.endsWith('/messages'));
    expect(seen.map((r) => `${r.method} ${r.status}`).join(',')).toBe(`${creates},GET 200,${creates},GET 200`);
  });
});

/** No gateway connection (HERALD_GATEWAY=off, as on extra replicas): no nonce reports, history only. */
describe('deliveries in doubt, without the gateway', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({
      sandbox: { nonceWindowMs: 1_000 },
      env: { HERALD_GATEWAY: 'off', HERALD_NONCE_WINDOW_MS: '0', HERALD_MAX_ATTEMPTS: '2', HERALD_DISCORD_TIMEOUT_MS: '15000', HERALD_LEASE_MS: '30000' },
    });
    await h.mapDestination('alerts', IDS.channels.alerts);
  });
  afterAll(() => h.close());
  beforeEach(() => h.sandbox.clearFaults());

  const withContent = (content: string) => h.sandbox.allMessages().filter((m) => m.content === content);
  const urlOf = (channelId: string, messageId: string | undefined) => `https://discord.com/channels/${IDS.guild}/${channelId}/${messageId}`;

  it('created but answered 5xx, history unreadable: ends unknown (not failed), and a re-POST finds the message instead of sending again', async () => {
    const id = newRequestId();
    const content = `doubt ${id}`;
    // The first create succeeds behind a 500; the next tries get 500s too.
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error_after_create', status: 500 });
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 500, times: 2 });
    // Reconciliation cannot read the channel.
    h.sandbox.inject({ method: 'GET', path: '/messages$', action: 'error', status: 500, times: 1_000 });
    await h.bridge.post('/mcp/deliveries', post(id, content));
    await h.waitForState(id, 'unknown', 40_000);
    expect(withContent(content)).toHaveLength(1);

    h.sandbox.clearFaults();
    const retry = await h.bridge.post('/mcp/deliveries', post(id, content));
    expect(retry.json).toMatchObject({ existing: true, state: { state: 'pending' } });
    const state = await h.waitForState(id, 'delivered', 30_000);
    const sent = withContent(content);
    expect(sent).toHaveLength(1);
    expect(state['url']).toBe(urlOf(IDS.channels.alerts, sent[0]?.id));
  });

});
