import { randomBytes } from 'node:crypto';
import { deliveryNonce } from '../../src/modules/deliveries/delivery.js';
import { DiscordSandbox, SANDBOX_IDS } from '../../src/platforms/discord/sandbox/sandbox.js';

/**
 * `npm run bench -- --only=twins`: what the twin lane costs (src/modules/deliveries/delivery.twins.ts).
 * N identical alerts to one channel (twins: they go one at a time) against N distinct alerts to the
 * same channel (the floor: nothing holds them back), each drained by Herald on the Discord sandbox
 * (its default limits, 50 creates a second a route, so the channel's limit does not hide the
 * lane), from the first POST to the last message in the channel. Reported: both times, their ratio,
 * and duplicates (messages carrying the same delivery's nonce; 0). On PostgreSQL two processes
 * dispatch, so the twins are also kept apart across processes.
 */

export interface TwinsHarness {
  /** Empty the deliveries table. */
  truncate(): Promise<void>;
  /** Start `processes` Herald processes (one serve, the rest dispatch) on this sandbox. */
  start(sandbox: DiscordSandbox, processes: number): Promise<{ url: string; bridge: Record<string, string>; admin: Record<string, string>; stop(): Promise<void> }>;
  processes: number;
}

export async function twinsDrain(harness: TwinsHarness, n: number): Promise<Record<string, number>> {
  const sandbox = await new DiscordSandbox().start();
  try {
    const distinct = await drainOnce(harness, sandbox, n, false);
    const identical = await drainOnce(harness, sandbox, n, true);
    const row = {
      [`twins: ${n} distinct to one channel s`]: round(distinct.seconds),
      [`twins: ${n} identical to one channel s`]: round(identical.seconds),
      'twins: identical ÷ distinct': round(identical.seconds / distinct.seconds, 100),
      'twins: duplicates': distinct.duplicates + identical.duplicates,
    };
    console.log(`  twins: ${n} distinct ${distinct.seconds.toFixed(2)} s, ${n} identical ${identical.seconds.toFixed(2)} s (×${(identical.seconds / distinct.seconds).toFixed(2)}), duplicates ${distinct.duplicates + identical.duplicates}`);
    return row;
  } finally {
    await sandbox.close();
  }
}

async function drainOnce(harness: TwinsHarness, sandbox: DiscordSandbox, n: number, identical: boolean): Promise<{ seconds: number; duplicates: number }> {
  await harness.truncate();
  const h = await harness.start(sandbox, harness.processes);
  try {
    const mapped = await fetch(`${h.url}/admin/destinations/${SANDBOX_IDS.guild}/alerts`, { method: 'PUT', headers: { 'content-type': 'application/json', ...h.admin }, body: JSON.stringify({ channel_id: SANDBOX_IDS.channels.alerts }) });
    if (mapped.status !== 200) throw new Error(`mapping alerts: ${mapped.status}`);
    const run = randomBytes(4).toString('hex');
    const ids = Array.from({ length: n }, () => randomBytes(32).toString('hex'));
    const nonces = new Set(ids.map((id) => deliveryNonce(id)));
    const t0 = performance.now();
    await Promise.all(
      ids.map(async (id, i) => {
        const body = { content: identical ? `Disk usage above 90% on db-1 (${run})` : `Disk usage above 90% on db-${i} (${run})` };
        const res = await fetch(`${h.url}/mcp/deliveries`, { method: 'POST', headers: { 'content-type': 'application/json', ...h.bridge }, body: JSON.stringify({ request_id: id, kind: 'post', target: { guild_id: SANDBOX_IDS.guild, destination: 'alerts' }, body }) });
        if (res.status !== 202) throw new Error(`twins POST: ${res.status}`);
        await res.arrayBuffer();
      }),
    );
    const deadline = Date.now() + 120_000;
    const count = () => sandbox.allMessages().filter((m) => typeof m.nonce === 'string' && nonces.has(m.nonce)).length;
    while (count() < n) {
      if (Date.now() > deadline) throw new Error(`twins: ${count()} of ${n} messages after 120 s`);
      await new Promise((r) => setTimeout(r, 10));
    }
    const seconds = (performance.now() - t0) / 1000;
    const seen = sandbox.allMessages().filter((m) => typeof m.nonce === 'string' && nonces.has(m.nonce));
    return { seconds, duplicates: seen.length - new Set(seen.map((m) => m.nonce)).size };
  } finally {
    await h.stop();
  }
}

const round = (x: number, by = 1000): number => Math.round(x * by) / by;
