import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MEMORY_IDS } from '../src/platforms/memory/index.js';
import { client } from './support/client.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { newRequestId, newToken } from './support/herald.js';
import { startHeraldProcess, type HeraldProcess } from './support/process.js';
import { waitForDelivery } from './support/wait.js';

/** `herald serve` on the memory platform (HERALD_TRANSPORT=memory): a smoke test with no Discord at all. */
describe('herald serve on the memory platform', () => {
  let db: TestDatabase;
  let proc: HeraldProcess;
  const bridgeToken = newToken();
  const adminToken = newToken();
  beforeAll(async () => {
    db = await testDatabase();
    proc = await startHeraldProcess(['serve'], {
      HERALD_TRANSPORT: 'memory',
      PORT: '0',
      HERALD_METRICS_PORT: 'off',
      HERALD_DATA_DIR: db.dataDir,
      MCP_BRIDGE_TOKEN: bridgeToken,
      HERALD_ADMIN_TOKEN: adminToken,
      HERALD_POLL_MS: '100',
      ...(db.databaseUrl !== undefined ? { DATABASE_URL: db.databaseUrl } : {}),
    }, 120_000);
  }, 150_000);
  afterAll(async () => {
    if (proc !== undefined && proc.child.exitCode === null) {
      proc.kill('SIGTERM');
      await proc.exited;
    }
    await db?.drop();
  });

  it('starts without a Discord token or the sandbox, and delivers a post to a memory channel', async () => {
    expect(proc.output()).not.toContain('Discord sandbox');
    const url = proc.url ?? '';
    const admin = client(url, adminToken);
    const bridge = client(url, bridgeToken);
    const mapped = await admin.put(`/admin/destinations/${MEMORY_IDS.guild}/alerts`, { channel_id: MEMORY_IDS.channels.alerts });
    expect(mapped.status, mapped.text).toBe(200);
    const requestId = newRequestId();
    const accepted = await bridge.post('/mcp/deliveries', { request_id: requestId, kind: 'post', target: { guild_id: MEMORY_IDS.guild, destination: 'alerts' }, body: { content: 'hello' } });
    expect(accepted.status, accepted.text).toBe(202);
    await waitForDelivery(bridge, requestId, 'delivered', 'the post to be delivered', 20_000);
    // A channel the memory platform does not have cannot be mapped: the destination is looked up there.
    const missing = await admin.put(`/admin/destinations/${MEMORY_IDS.guild}/ops`, { channel_id: '299999999999999999' });
    expect(missing.status).toBe(422);
  });
});
