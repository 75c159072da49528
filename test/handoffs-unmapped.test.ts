import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { IDS, newRequestId, startTestHerald } from './support/herald.js';
import { waitForStateAt } from './support/wait.js';

/**
 * Where a handoff may go is checked again when it is sent: one accepted while its channel was
 * mapped, whose mapping is removed before any dispatcher sends it, fails and posts nothing.
 */
describe('a handoff whose channel is unmapped before it is sent', () => {
  let sandbox: DiscordSandbox;
  let db: TestDatabase;
  let peer: string;

  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
    peer = sandbox.addBot('helper').user.id;
    db = await testDatabase();
  }, 60_000);
  afterAll(async () => {
    await sandbox?.close();
    await db?.drop();
  });

  it('fails UPSTREAM_UNAVAILABLE at send time, and no message reaches the channel', async () => {
    const env = { HERALD_TRUSTED_BOT_IDS: peer };
    const requestId = newRequestId();
    // Accepted by a replica that does not dispatch, then unmapped there.
    const api = await startTestHerald({ useSandbox: sandbox, useDb: db, env, roles: { http: true, dispatcher: false } });
    try {
      await api.mapDestination('ops', IDS.channels.ops);
      const res = await api.bridge.post('/mcp/handoffs', { request_id: requestId, target_bot_id: peer, channel_id: IDS.channels.ops, text: 'unmapped before it was sent' });
      expect([res.status, (res.json as { handoff: { state: string } }).handoff.state]).toEqual([202, 'pending']);
      expect((await api.admin.delete(`/admin/destinations/${IDS.guild}/ops`)).status).toBe(204);
    } finally {
      await api.close();
    }
    // A dispatcher takes it now.
    const full = await startTestHerald({ useSandbox: sandbox, useDb: db, env });
    try {
      const failed = await waitForStateAt(full.bridge, `/mcp/handoffs/${requestId}`, 'failed', 'the handoff to fail');
      expect(failed['code']).toBe('UPSTREAM_UNAVAILABLE');
      expect(sandbox.channelMessages(IDS.channels.ops).filter((m) => m.content.includes('unmapped before it was sent'))).toEqual([]);
    } finally {
      await full.close();
    }
    // Two Heralds start one after the other on a shared, busy machine.
  }, 150_000);
});
