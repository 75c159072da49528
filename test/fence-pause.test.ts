import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { client } from './support/client.js';
import { onPostgres } from './support/db.js';
import { IDS, newRequestId, post } from './support/herald.js';
import { crashRig } from './support/rigs.js';
import type { HeraldProcess } from './support/process.js';
import { waitFor, waitForDelivery } from './support/wait.js';

/** Whether the process is stopped (SIGSTOP): its state in /proc is `T`. */
function stopped(proc: HeraldProcess): boolean {
  try {
    const stat = readFileSync(`/proc/${proc.child.pid ?? 0}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('T');
  } catch {
    return false;
  }
}

/**
 * A Herald that stalls past its lease (SIGSTOP, as a long pause would) at the worst moments, with
 * another Herald on the same store taking its delivery over. The Discord here forgets nonces at
 * once, so Discord cannot save Herald: only the fences can (src/infra/faults/fence.ts). Each
 * process stalls itself at a fault point (HERALD_FAULT_POINTS, src/infra/faults/fault-points.ts).
 */
describe('a Herald stalled past its lease', () => {
  const { database, start, bridgeToken, adminToken, forgetfulDiscord } = crashRig({ env: { HERALD_LEASE_MS: '2500', HERALD_DISCORD_TIMEOUT_MS: '1000' } });

  async function stallAt(point: string, id: string, content: string) {
    await database();
    const { discord, pastWindow } = await forgetfulDiscord();
    const stalling = await start(['serve'], { ...pastWindow, HERALD_FAULT_POINTS: `${point}=once` });
    expect((await client(stalling.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts })).status).toBe(200);
    expect((await client(stalling.url ?? '', bridgeToken).post('/mcp/deliveries', post(id, content))).status).toBe(202);
    await waitFor(() => stopped(stalling), `the first Herald to stall at ${point}`, 20_000);
    const other = await start(['serve'], pastWindow);
    return { discord, stalling, other, messages: () => discord.allMessages().filter((m) => m.content === content) };
  }

  it.skipIf(!onPostgres)('stalled just before its create leaves: the other Herald sends it once; continued, the stalled one sends nothing', async () => {
    const id = newRequestId();
    const { stalling, other, messages } = await stallAt('before-send', id, `stalled-before-send ${id}`);
    expect(messages()).toHaveLength(0);
    const state = await waitForDelivery(client(other.url ?? '', bridgeToken), id, 'delivered', 'the delivery taken over');
    stalling.kill('SIGCONT');
    await waitFor(() => stalling.output().includes('lease ended before the job was done'), 'the continued Herald to stop the job', 20_000);
    expect(messages()).toHaveLength(1);
    expect(state['url']).toContain(messages()[0]?.id ?? 'none');
  });

  it.skipIf(!onPostgres)('stalled between Discord’s answer and the commit: the other Herald finds the message; continued, the stalled one writes nothing over it', async () => {
    const id = newRequestId();
    const { stalling, other, messages } = await stallAt('after-answer', id, `stalled-after-answer ${id}`);
    expect(messages()).toHaveLength(1);
    const api = client(other.url ?? '', bridgeToken);
    const state = await waitForDelivery(api, id, 'delivered', 'the delivery taken over');
    stalling.kill('SIGCONT');
    await waitFor(() => stalling.output().includes('lease lost before the outcome was recorded'), 'the continued Herald to give its outcome up', 20_000);
    expect(messages()).toHaveLength(1);
    expect((await api.get(`/mcp/deliveries/${id}`)).json).toEqual(state);
  });
});
