import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SlackSandbox } from '../src/platforms/slack/sandbox/sandbox.js';
import { onPostgres } from './support/db.js';
import { partitionRig, portOf, Sampler, singletonState, type Replica } from './support/partition.js';
import { crashRig } from './support/rigs.js';
import { waitFor } from './support/wait.js';

const TTL = 2_000;
const DOWN = 4_000;
const TIMINGS = { HERALD_SINGLETON_TTL_MS: String(TTL), HERALD_SINGLETON_DOWN_MS: String(DOWN) };

/** A connection one replica holds, as the partition tests see it. */
interface Held {
  /** Its lease. */
  name: string;
  /** How many such connections the platform sandbox has open now. */
  count(): number;
  /** The sandbox's port (the replicas reach it through their proxies). */
  port(): number;
  /** A replica's environment for it, reaching the sandbox on `port`. */
  env(port: number): Record<string, string>;
}

/**
 * Two `herald serve` replicas on one PostgreSQL, each behind TCP proxies of its own to PostgreSQL
 * and to the platform sandbox: the holder of a singleton connection cut from the database closes
 * the connection before the other replica can take the lease over; cut from the platform, it gives
 * the lease up after HERALD_SINGLETON_DOWN_MS so the other replica, which can reach the platform,
 * holds the connection instead.
 */
describe.skipIf(!onPostgres)('singleton connections across a partition', () => {
  const rig = crashRig();
  const parts = partitionRig();
  const slack = new SlackSandbox();
  beforeAll(async () => {
    await slack.start(0, '127.0.0.1');
  });
  afterAll(() => slack.close());

  const discord: Held = {
    name: 'discord:gateway',
    count: () => rig.sandbox.gatewaySessions,
    port: () => portOf(rig.sandbox.apiUrl),
    env: (port) => ({ DISCORD_API_URL: `http://127.0.0.1:${port}/api` }),
  };
  const slackSocket: Held = {
    name: 'slack:socket',
    count: () => slack.socketConnections,
    port: () => portOf(slack.apiUrl),
    env: (port) => ({
      SLACK_BOT_TOKEN: slack.botToken,
      SLACK_APP_TOKEN: slack.appToken,
      SLACK_API_URL: `http://127.0.0.1:${port}/api/`,
      HERALD_SLACK_TIMEOUT_MS: '3000',
      HERALD_GATEWAY: 'off',
    }),
  };

  const state = (r: Replica, held: Held) => singletonState(r.proc, rig.bridgeToken, held.name);

  /** Two replicas: the first holds the connection (one open at the sandbox), the second waits on standby. */
  async function pair(held: Held): Promise<[Replica, Replica]> {
    const db = await rig.database();
    const start = (env: Record<string, string>) => rig.start(['serve'], { ...TIMINGS, ...env });
    const url = db.databaseUrl ?? '';
    const first = await parts.replica(start, url, held.port(), held.env);
    await waitFor(async () => held.count() === 1 && (await state(first, held)) === 'held', `the first replica to hold ${held.name}`, 30_000);
    const second = await parts.replica(start, url, held.port(), held.env);
    await waitFor(async () => (await state(second, held))?.startsWith('standby (held by ') === true, 'the second replica on standby', 15_000);
    // One connection between them: the standby opened none.
    expect(held.count()).toBe(1);
    return [first, second];
  }

  /** Wait until `to` holds the connection and it is open at the sandbox; then stop sampling. */
  async function takenOverBy(to: Replica, held: Held, sampler: Sampler): Promise<void> {
    await waitFor(async () => (await state(to, held)) === 'held' && held.count() === 1, 'the second replica to hold the connection', 60_000);
    await sampler.stop();
  }

  for (const held of [discord, slackSocket]) {
    it(`${held.name}: a holder cut from the database closes its connection before the other replica can take the lease over`, async () => {
      const [first, second] = await pair(held);
      const sampler = new Sampler(() => held.count());
      const cut = performance.now();
      first.db.cut();
      await takenOverBy(second, held, sampler);
      const closed = sampler.firstAt(0, cut) ?? Infinity;
      const reopened = sampler.firstAt(1, closed) ?? Infinity;
      console.log(`${held.name}: the holder cut from PostgreSQL closed its connection ${Math.round(closed - cut)} ms after the cut; the other replica's was open ${Math.round(reopened - cut)} ms after it (ttl ${TTL} ms)`);
      // Never two at once, and the cut holder's closed before its lease could have run out.
      expect(sampler.max).toBe(1);
      expect(closed - cut).toBeLessThan(TTL);
      expect(reopened).toBeGreaterThan(closed);
      // Closed by the holder itself: it is still running.
      expect(first.proc.child.exitCode).toBeNull();
    }, 120_000);

    it(`${held.name}: a holder cut from the platform gives the lease up after HERALD_SINGLETON_DOWN_MS; the other replica takes the connection over`, async () => {
      const [first, second] = await pair(held);
      const sampler = new Sampler(() => held.count());
      const cut = performance.now();
      first.platform.cut();
      await takenOverBy(second, held, sampler);
      const takeover = performance.now() - cut;
      console.log(`${held.name}: taken over from the holder cut from the platform in ${Math.round(takeover)} ms (HERALD_SINGLETON_DOWN_MS ${DOWN}, ttl ${TTL} ms)`);
      expect(sampler.max).toBe(1);
      expect(takeover).toBeLessThan(DOWN + 2 * TTL + 5_000);
      // The first sees the second holding it at its next look.
      await waitFor(async () => /^standby \(held by .+\)$/.test((await state(first, held)) ?? ''), 'the first replica to see the second hold it', 5_000);
      // Healed and past its rest, the first bids again: the second holds it, so it stays on standby with nothing open.
      first.platform.heal();
      const after = new Sampler(() => held.count());
      await new Promise((r) => setTimeout(r, DOWN + TTL));
      await after.stop();
      expect(after.max).toBeLessThanOrEqual(1);
      expect(await state(first, held)).toMatch(/^standby \(held by .+\)$/);
      expect(await state(second, held)).toBe('held');
    }, 120_000);
  }
});
