import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliveryNonce } from '../src/modules/deliveries/delivery.js';
import { onPostgres } from './support/db.js';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

// Deliveries in doubt across two dispatchers on one PostgreSQL database; one process at a time,
// on either store, is test/in-doubt.test.ts.

/**
 * Two dispatchers (one delivery each) on one PostgreSQL database, so one create can be held in
 * flight while the other's is in doubt: discord.js runs one process's creates in a channel one by one.
 */
describe('twins in doubt across dispatchers', () => {
  let h: TestHerald;
  let other: TestHerald;
  beforeAll(async () => {
    if (!onPostgres) return;
    const env = { HERALD_NONCE_WINDOW_MS: '0', HERALD_MAX_ATTEMPTS: '2', HERALD_DISCORD_TIMEOUT_MS: '15000', HERALD_LEASE_MS: '30000', HERALD_DISPATCH_CONCURRENCY: '1', HERALD_GATEWAY: 'off' };
    h = await startTestHerald({ sandbox: { nonceWindowMs: 1_000 }, env });
    other = await startTestHerald({ useSandbox: h.sandbox, useDb: h.db, env });
    await h.mapDestination('alerts', IDS.channels.alerts);
  });
  afterAll(async () => {
    await other?.close();
    await h?.close();
  });

  const withContent = (content: string) => h.sandbox.allMessages().filter((m) => m.content === content);
  const urlOf = (channelId: string, messageId: string | undefined) => `https://discord.com/channels/${IDS.guild}/${channelId}/${messageId}`;

  it.skipIf(!onPostgres)("never adopts a twin's message: the same content twice, one in doubt waits while the other is in flight", async () => {
    const a = newRequestId();
    const b = newRequestId();
    const content = `twin ${a.slice(0, 8)}`;
    // A is created at once but its answer is held; B is created behind a 500.
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'delay_after_create', ms: 9_000 });
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error_after_create', status: 500 });
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 500, times: 2 });
    await h.bridge.post('/mcp/deliveries', post(a, content));
    await waitFor(() => withContent(content).length === 1, "A's message to be created");
    await h.bridge.post('/mcp/deliveries', post(b, content));
    await waitFor(() => withContent(content).length === 2, "B's message to be created");

    // B cannot tell its message from A's while A is being attempted: it waits, never adopting A's.
    const stateA = await h.waitForState(a, 'delivered', 30_000);
    const stateB = await h.waitForState(b, 'delivered', 30_000);

    const sent = withContent(content);
    expect(sent).toHaveLength(2);
    expect(stateA['url']).not.toBe(stateB['url']);
    // Each url names the message its own request created (the sandbox keeps each message's nonce).
    for (const [id, state] of [[a, stateA], [b, stateB]] as const) {
      const own = sent.find((m) => m.nonce === deliveryNonce(id));
      expect(state['url']).toBe(urlOf(IDS.channels.alerts, own?.id));
    }
  });

});
