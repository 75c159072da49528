import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { deliveryNonce } from '../src/modules/deliveries/delivery.js';
import { onPostgres } from './support/db.js';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/**
 * Twins (the same content to the same channel) take turns (src/modules/deliveries/delivery.twins.ts),
 * so a create in doubt is always told apart from its twins' by the channel's history: they end
 * `delivered`, each with its own message, where two in doubt together had to end `unknown`.
 */
const urlOf = (channelId: string, messageId: string | undefined) => `https://discord.com/channels/${IDS.guild}/${channelId}/${messageId}`;
const creates = (h: TestHerald) => h.sandbox.requests.filter((r) => r.method === 'POST' && r.path === `/channels/${IDS.channels.alerts}/messages`);

describe('twins on one channel, without the gateway (history only)', () => {
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

  it('two twins whose creates are lost during a gap both end delivered, each with its own message (old code: unknown)', async () => {
    const a = newRequestId();
    const b = newRequestId();
    const content = `gap twins ${a.slice(0, 8)}`;
    const before = creates(h).length;
    // A is created behind a 500 (discord.js does not repeat a create): in doubt, with a message.
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error_after_create', status: 500 });
    await h.bridge.post('/mcp/deliveries', post(a, content));
    await waitFor(() => creates(h).length === before + 1, "A's create");
    // B's create gets a 500 and creates nothing, but B cannot know that: in doubt too.
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 500, times: 1 });
    await h.bridge.post('/mcp/deliveries', post(b, content));
    const stateA = await h.waitForState(a, 'delivered', 60_000);
    const stateB = await h.waitForState(b, 'delivered', 60_000);
    const sent = withContent(content);
    expect(sent).toHaveLength(2);
    for (const [id, state] of [[a, stateA], [b, stateB]] as const) {
      const own = sent.find((m) => m.nonce === deliveryNonce(id));
      expect(state['url']).toBe(urlOf(IDS.channels.alerts, own?.id));
    }
  }, 90_000);

  it('100 identical alerts to one channel all end delivered, once each', async () => {
    const content = `flood ${newRequestId().slice(0, 8)}`;
    const ids = Array.from({ length: 100 }, () => newRequestId());
    await Promise.all(ids.map((id) => h.bridge.post('/mcp/deliveries', post(id, content))));
    // Watched in the channel, not by polling each of the hundred (which would load the Herald under test).
    await waitFor(() => withContent(content).length >= 100, 'a hundred messages', 60_000);
    const states: Record<string, unknown>[] = [];
    for (const id of ids) states.push(await h.waitForState(id, 'delivered', 10_000));
    const sent = withContent(content);
    expect(sent).toHaveLength(100);
    expect(new Set(sent.map((m) => m.nonce))).toEqual(new Set(ids.map((id) => deliveryNonce(id))));
    ids.forEach((id, i) => expect(states[i]?.['url']).toBe(urlOf(IDS.channels.alerts, sent.find((m) => m.nonce === deliveryNonce(id))?.id)));
  }, 90_000);
});

/**
 * Two dispatchers (one delivery at a time each) on one PostgreSQL database: discord.js runs one
 * process's creates in a channel one by one, so twins could only be in flight together on two.
 */
describe('twins across two dispatchers', () => {
  let h: TestHerald;
  let other: TestHerald;
  beforeAll(async () => {
    if (!onPostgres) return;
    const env = { HERALD_NONCE_WINDOW_MS: '0', HERALD_DISCORD_TIMEOUT_MS: '15000', HERALD_LEASE_MS: '30000', HERALD_DISPATCH_CONCURRENCY: '1', HERALD_GATEWAY: 'off' };
    h = await startTestHerald({ sandbox: { nonceWindowMs: 1_000 }, env });
    other = await startTestHerald({ useSandbox: h.sandbox, useDb: h.db, env });
    await h.mapDestination('alerts', IDS.channels.alerts);
  });
  afterAll(async () => {
    await other?.close();
    await h?.close();
  });

  it.skipIf(!onPostgres)('two identical posts to one channel are never in flight together: the second leaves once the first is answered (old code: at once, from the other dispatcher)', async () => {
    const a = newRequestId();
    const b = newRequestId();
    const content = `lane ${a.slice(0, 8)}`;
    const HELD_MS = 4_000;
    const before = creates(h).length;
    // A is created at once, its answer held.
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'delay_after_create', ms: HELD_MS });
    await h.bridge.post('/mcp/deliveries', post(a, content));
    await waitFor(() => h.sandbox.allMessages().some((m) => m.content === content), "A's message to be created");
    await h.bridge.post('/mcp/deliveries', post(b, content));
    await h.waitForState(a, 'delivered', 30_000);
    await h.waitForState(b, 'delivered', 30_000);
    const [first, second] = creates(h).slice(before);
    expect(second).toBeDefined();
    // B's create arrived only after A's was answered.
    expect((second?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThanOrEqual(HELD_MS);
    expect(h.sandbox.allMessages().filter((m) => m.content === content)).toHaveLength(2);
  }, 60_000);
});
