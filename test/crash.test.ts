import { describe, expect, it } from 'vitest';
import { startHerald } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { client } from './support/client.js';
import { IDS, newRequestId, post } from './support/herald.js';
import { crashRig, type DiscordSandbox } from './support/rigs.js';
import { waitFor, waitForDelivery, waitForStateAt } from './support/wait.js';

/**
 * Crash safety with real processes: SIGKILL a Herald after Discord created the message and
 * before Herald recorded it, then restart. docs/guides/how-it-works.md: exactly once, in doubt.
 */
describe('a dispatcher killed between Discord accepting and the commit', () => {
  const { sandbox, bridgeToken, adminToken, database, env, start, forgetfulDiscord } = crashRig({ env: { HERALD_DISCORD_TIMEOUT_MS: '1000', HERALD_LEASE_MS: '2500' } });
  const messages = (content: string) => sandbox.allMessages().filter((m) => m.content === content);

  /** Post through a fresh `herald serve`, and SIGKILL it while Discord's (`discord`'s) answer is held back. */
  async function postAndKillAfterDiscordAccepted(id: string, content: string, extra: Record<string, string> = {}, discord: DiscordSandbox = sandbox) {
    const first = await start(['serve'], extra);
    const api = client(first.url ?? '', bridgeToken);
    const map = await client(first.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts });
    expect(map.status).toBe(200);
    discord.inject({ method: 'POST', path: '/messages$', action: 'delay_after_create', ms: 60_000 });
    expect((await api.post('/mcp/deliveries', post(id, content))).status).toBe(202);
    await waitFor(() => discord.allMessages().filter((m) => m.content === content).length === 1, 'Discord to create the message');
    first.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    discord.clearFaults();
  }

  it('inside the nonce window: the restarted Herald re-drives it and Discord returns the same message', async () => {
    await database();
    const id = newRequestId();
    const content = `crash-nonce ${id}`;
    await postAndKillAfterDiscordAccepted(id, content);
    const second = await start(['serve']);
    const api = client(second.url ?? '', bridgeToken);
    const state = await waitForDelivery(api, id, 'delivered', 'the re-driven delivery');
    const sent = messages(content);
    expect(sent).toHaveLength(1);
    expect(state['url']).toBe(`https://discord.com/channels/${IDS.guild}/${IDS.channels.alerts}/${sent[0]?.id}`);
  });

  it('past the nonce window: the restarted Herald finds the message in the channel instead of sending again', async () => {
    await database();
    // This Discord forgets nonces at once, and Herald knows not to trust them. No gateway, so no
    // nonce report either: the channel's history is what settles it.
    const { discord: forgetful, pastWindow } = await forgetfulDiscord();
    const id = newRequestId();
    const content = `crash-reconcile ${id}`;
    await postAndKillAfterDiscordAccepted(id, content, pastWindow, forgetful);
    const second = await start(['serve'], pastWindow);
    const api = client(second.url ?? '', bridgeToken);
    await waitForDelivery(api, id, 'delivered', 'the reconciled delivery').catch((e: unknown) => { throw new Error(`${String(e)}\n${second.output()}`); });
    expect(forgetful.allMessages().filter((m) => m.content === content)).toHaveLength(1);
    const listed = forgetful.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/messages'));
    expect(listed.length).toBeGreaterThan(0);
  });

  it('shows the orphaned delivery as unknown, and a retry POST resets it to pending and delivers it once', async () => {
    await database();
    const id = newRequestId();
    const content = `crash-unknown ${id}`;
    await postAndKillAfterDiscordAccepted(id, content);
    // An API-only Herald (no dispatcher) on the same store shows what the dead process left behind.
    const config = loadConfig({ ...env(), LOG_LEVEL: 'silent' });
    const apiOnly = await startHerald({ config, log: createLogger('silent'), roles: { http: true, dispatcher: false } });
    try {
      const api = client(apiOnly.url ?? '', bridgeToken);
      await waitForDelivery(api, id, 'unknown', 'the lease to expire', 10_000);
      const retry = await api.post('/mcp/deliveries', post(id, content));
      expect(retry.json).toMatchObject({ existing: true, state: { state: 'pending' } });
    } finally {
      await apiOnly.close();
    }
    const second = await start(['serve']);
    const api = client(second.url ?? '', bridgeToken);
    await waitForDelivery(api, id, 'delivered', 'the delivery');
    expect(messages(content)).toHaveLength(1);
  });

  it('past the nonce window, a connector re-POSTing the orphan keeps it in doubt: one message, found in history', async () => {
    await database();
    const { discord: forgetful, pastWindow } = await forgetfulDiscord();
    const id = newRequestId();
    const content = `crash-repost ${id}`;
    await postAndKillAfterDiscordAccepted(id, content, pastWindow, forgetful);
    // The connector sees `unknown` and re-POSTs before any dispatcher re-drives it.
    const config = loadConfig({ ...env(pastWindow), LOG_LEVEL: 'silent' });
    const apiOnly = await startHerald({ config, log: createLogger('silent'), roles: { http: true, dispatcher: false } });
    try {
      const api = client(apiOnly.url ?? '', bridgeToken);
      await waitForDelivery(api, id, 'unknown', 'the lease to expire', 10_000);
      expect((await api.post('/mcp/deliveries', post(id, content))).json).toMatchObject({ existing: true, state: { state: 'pending' } });
    } finally {
      await apiOnly.close();
    }
    const second = await start(['serve'], pastWindow);
    const api = client(second.url ?? '', bridgeToken);
    const state = await waitForDelivery(api, id, 'delivered', 'the reconciled delivery');
    const sent = forgetful.allMessages().filter((m) => m.content === content);
    expect(sent).toHaveLength(1);
    expect(state['url']).toBe(`https://discord.com/channels/${IDS.guild}/${IDS.channels.alerts}/${sent[0]?.id}`);
  });

  it('an edit left half-applied by a killed process does not block the next edit of that message for long', async () => {
    await database();
    // A long delivery lease: before the fix the original's edit lease lasted as long.
    const long = { HERALD_LEASE_MS: '60000' };
    const first = await start(['serve'], long);
    const api = client(first.url ?? '', bridgeToken);
    await client(first.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts });
    const original = newRequestId();
    await api.post('/mcp/deliveries', post(original, `edit-crash ${original}`));
    await waitForDelivery(api, original, 'delivered', 'the original');
    const message = messages(`edit-crash ${original}`)[0];
    // Discord holds the first edit; its process dies while applying it.
    sandbox.inject({ method: 'PATCH', path: '/messages/[0-9]+$', action: 'delay', ms: 60_000 });
    const patches = () => sandbox.requests.filter((r) => r.method === 'PATCH').length;
    const before = patches();
    const edit = (id: string, seq: number, content: string) => ({ request_id: id, kind: 'edit', target: { message_ref: original, seq }, body: { content } });
    await api.post('/mcp/deliveries', edit(newRequestId(), 1, 'v1'));
    await waitFor(() => patches() > before, 'the first edit to reach Discord');
    first.kill('SIGKILL');
    await first.exited;

    const second = await start(['serve'], long);
    const api2 = client(second.url ?? '', bridgeToken);
    const next = newRequestId();
    const accepted = Date.now();
    await api2.post('/mcp/deliveries', edit(next, 2, 'v2'));
    const state = await waitForDelivery(api2, next, 'delivered', 'the next edit', 20_000);
    expect(state['applied']).toBe(true);
    expect(Date.now() - accepted).toBeLessThan(15_000);
    expect(sandbox.channelMessages(IDS.channels.alerts).find((m) => m.id === message?.id)?.content).toBe('v2');
  });

  /**
   * A handoff is a delivery underneath: a sender SIGKILLed after Discord created the handoff
   * message and before Herald recorded it still yields one handoff message, inside the nonce window
   * (Discord answers the resend with the same message) and past it (found in channel history).
   */
  describe('a handoff', () => {
    const PEER = '111111111111111112';

    async function handOffThenCrashThenRecover(discord: DiscordSandbox, extra: Record<string, string> = {}): Promise<void> {
      await database();
      const requestId = newRequestId();
      const text = `crash handoff ${requestId}`;
      const trusted = { HERALD_TRUSTED_BOT_IDS: PEER, ...extra };
      const first = await start(['serve'], trusted);
      // A handoff goes only to a mapped destination's channel.
      expect((await client(first.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/ops`, { channel_id: IDS.channels.ops })).status).toBe(200);
      discord.inject({ method: 'POST', path: '/messages$', action: 'delay_after_create', ms: 60_000 });
      const accepted = await client(first.url ?? '', bridgeToken).post('/mcp/handoffs', { request_id: requestId, target_bot_id: PEER, channel_id: IDS.channels.ops, text });
      expect(accepted.status).toBe(202);
      const ours = () => discord.allMessages().filter((m) => m.content.includes(text));
      await waitFor(() => ours().length === 1, 'Discord to create the handoff message');
      first.kill('SIGKILL');
      expect((await first.exited).signal).toBe('SIGKILL');
      discord.clearFaults();
      const second = await start(['serve'], trusted);
      const api = client(second.url ?? '', bridgeToken);
      const state = await waitForStateAt(api, `/mcp/handoffs/${requestId}`, 'delivered', 'the re-driven handoff');
      const sent = ours();
      expect(sent).toHaveLength(1);
      expect(state['url']).toBe(`https://discord.com/channels/${IDS.guild}/${IDS.channels.ops}/${sent[0]?.id}`);
      expect(sent[0]?.allowed_mentions).toEqual({ parse: [], users: [PEER] });
    }

    it('inside the nonce window: the restarted sender re-drives it and Discord returns the same message', async () => {
      await handOffThenCrashThenRecover(sandbox);
      // Two `herald serve` start-ups through tsx: a loaded machine needs more than the default.
    }, 150_000);

    it('past the nonce window: the restarted sender finds the message in the channel instead of sending again', async () => {
      const { discord: forgetful, pastWindow } = await forgetfulDiscord();
      await handOffThenCrashThenRecover(forgetful, pastWindow);
      expect(forgetful.requests.some((r) => r.method === 'GET' && r.path.endsWith('/messages'))).toBe(true);
    }, 150_000);
  });
});
