import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { client } from './support/client.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { heraldEnv, IDS, newRequestId, newToken, post } from './support/herald.js';
import { startHeraldProcess } from './support/process.js';
import { waitFor, waitForDelivery } from './support/wait.js';

describe('SIGTERM', () => {
  let sandbox: DiscordSandbox;
  let db: TestDatabase;
  const bridgeToken = newToken();
  const adminToken = newToken();
  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
    db = await testDatabase();
  });
  afterAll(async () => {
    await sandbox.close();
    await db.drop();
  });
  const env = (extra: Record<string, string> = {}) =>
    heraldEnv({ sandbox, db, bridgeToken, adminToken }, { HERALD_DISCORD_TIMEOUT_MS: '5000', HERALD_LEASE_MS: '30000', ...extra });

  it('stops claiming, lets an in-flight delivery finish, and exits 0', async () => {
    const p = await startHeraldProcess(['serve'], env());
    await client(p.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts });
    const id = newRequestId();
    sandbox.inject({ method: 'POST', path: '/messages$', action: 'delay', ms: 1_000 });
    await client(p.url ?? '', bridgeToken).post('/mcp/deliveries', post(id, `graceful ${id}`));
    await waitFor(() => sandbox.requests.some((r) => r.method === 'POST' && r.status === 0), 'the send to be under way');
    p.kill('SIGTERM');
    expect((await p.exited).code).toBe(0);
    expect(sandbox.allMessages().filter((m) => m.content === `graceful ${id}`)).toHaveLength(1);
    expect(p.output()).toContain('"state":"delivered"');
  });

  it('finishes the same graceful stop on SIGINT when a second SIGINT arrives during it (npm relays the one a Ctrl-C sent the group)', async () => {
    const p = await startHeraldProcess(['serve'], env(), 60_000, { built: true });
    await client(p.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts });
    const id = newRequestId();
    sandbox.inject({ method: 'POST', path: '/messages$', action: 'delay', ms: 1_500 });
    await client(p.url ?? '', bridgeToken).post('/mcp/deliveries', post(id, `interrupted ${id}`));
    await waitFor(() => sandbox.requests.some((r) => r.method === 'POST' && r.status === 0), 'the send to be under way');
    process.kill(p.child.pid ?? 0, 'SIGINT');
    await waitFor(() => p.output().includes('"msg":"stopping: no new claims; finishing in-flight deliveries"'), 'the stop to begin');
    // What npm's relay does when it lands after Herald took the first signal.
    process.kill(p.child.pid ?? 0, 'SIGINT');
    expect(await p.exited).toEqual({ code: 0, signal: null });
    expect(p.output()).toContain('"msg":"stopped"');
    expect(sandbox.allMessages().filter((m) => m.content === `interrupted ${id}`)).toHaveLength(1);
  });

  it('releases what cannot finish within the grace period, for the next process to deliver once', async () => {
    const p = await startHeraldProcess(['serve'], env({ HERALD_SHUTDOWN_GRACE_MS: '300' }));
    const id = newRequestId();
    sandbox.inject({ method: 'POST', path: '/messages$', action: 'delay', ms: 4_000 });
    await client(p.url ?? '', bridgeToken).post('/mcp/deliveries', post(id, `released ${id}`));
    await waitFor(() => sandbox.requests.some((r) => r.method === 'POST' && r.status === 0), 'the send to be under way');
    p.kill('SIGTERM');
    expect((await p.exited).code).toBe(0);
    // Released, not left leased: the next process delivers it long before the 30 s lease would expire.
    const next = await startHeraldProcess(['serve'], env());
    try {
      const api = client(next.url ?? '', bridgeToken);
      await waitForDelivery(api, id, 'delivered', 'the released delivery');
      expect(sandbox.allMessages().filter((m) => m.content === `released ${id}`)).toHaveLength(1);
    } finally {
      next.kill('SIGKILL');
      await next.exited;
    }
  });
});
