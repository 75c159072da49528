import { describe, expect, it } from 'vitest';
import { client } from './support/client.js';
import { onPostgres } from './support/db.js';
import { IDS, newRequestId, post } from './support/herald.js';
import { crashRig } from './support/rigs.js';
import { waitFor, waitForDelivery } from './support/wait.js';

/**
 * Crash safety across processes on one PostgreSQL database (test/crash.test.ts kills one process
 * at a time, on either store): a dispatcher and the server SIGKILLed while others hold claims.
 */
describe('dispatchers on one database, one killed mid-flight', () => {
  const { sandbox, bridgeToken, adminToken, database, start } = crashRig({ env: { HERALD_DISCORD_TIMEOUT_MS: '1000', HERALD_LEASE_MS: '2500' } });
  const messages = (content: string) => sandbox.allMessages().filter((m) => m.content === content);

  it.skipIf(!onPostgres)('three dispatcher processes on one database, one killed mid-flight: every post exactly once', async () => {
    await database();
    const server = await start(['serve']);
    await client(server.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts });
    const dispatchers = [await start(['dispatch']), await start(['dispatch'])];
    const api = client(server.url ?? '', bridgeToken);
    // Every fifth create is held, so some deliveries are mid-flight when a dispatcher dies.
    sandbox.inject({ method: 'POST', path: '/messages$', action: 'delay_after_create', ms: 60_000, times: 6 });
    const ids = Array.from({ length: 40 }, () => newRequestId());
    await Promise.all(ids.map((id) => api.post('/mcp/deliveries', post(id, `many ${id}`))));
    await waitFor(() => sandbox.allMessages().filter((m) => m.content.startsWith('many ')).length >= 6, 'some messages to be created');
    dispatchers[0]?.kill('SIGKILL');
    server.kill('SIGKILL');
    await Promise.all([dispatchers[0]?.exited, server.exited]);
    sandbox.clearFaults();
    const restarted = await start(['serve']);
    const api2 = client(restarted.url ?? '', bridgeToken);
    for (const id of ids) {
      await waitForDelivery(api2, id, 'delivered', `delivery ${id.slice(0, 6)}`, 30_000);
    }
    for (const id of ids) expect(messages(`many ${id}`), id).toHaveLength(1);
    // Four `herald` start-ups through tsx: a loaded machine needs more than the default.
  }, 150_000);
});
