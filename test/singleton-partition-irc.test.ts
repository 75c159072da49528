import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcConnection } from '../src/platforms/irc/irc-connection.js';
import { onPostgres } from './support/db.js';
import { ircSkipReason, startIrcd, type Ircd } from './support/inspircd.js';
import { partitionRig, Sampler, singletonState, type Replica } from './support/partition.js';
import { crashRig } from './support/rigs.js';
import { waitFor } from './support/wait.js';

const log = pino({ level: 'silent' });
const TTL = 2_000;
const DOWN = 4_000;
const NAME = 'irc:observer';

/**
 * The IRC connections (`irc:observer`) across a partition, as test/singleton-partition.test.ts
 * does for Discord's gateway and Slack's Socket Mode: two replicas, each behind TCP proxies of its
 * own to PostgreSQL and to the IRC server; the channel is watched by another user on the network.
 */
// Two replicas need PostgreSQL; the IRC server is a tool CI installs (.ci/check-tools), so its
// absence fails the test rather than skipping it.
describe.skipIf(!onPostgres)('the IRC observer across a partition', () => {
  const rig = crashRig();
  const parts = partitionRig();
  let ircd: Ircd;
  let eve: IrcConnection | undefined;

  beforeAll(async () => {
    const missing = ircSkipReason();
    if (missing !== undefined) throw new Error(missing);
    ircd = await startIrcd();
    eve = new IrcConnection({ server: { host: '127.0.0.1', port: ircd.port, tls: false }, nick: 'eve', log, linesPerSecond: 100, echoTimeoutMs: 5_000, onLine: () => undefined });
    await eve.connect();
    await eve.join('#agents');
  }, 60_000);
  afterAll(async () => {
    await eve?.close();
    await ircd?.dispose();
  });

  /** Herald's observers in the channel, as eve sees them. */
  const observers = async (): Promise<number> => ((await eve?.names('#agents').catch(() => [])) ?? []).filter((n) => /^herald_*$/i.test(n.replace(/^[@+%~&]/, ''))).length;
  const state = (r: Replica) => singletonState(r.proc, rig.bridgeToken, NAME);

  async function pair(): Promise<[Replica, Replica]> {
    const db = await rig.database();
    const env = (port: number) => ({
      HERALD_IRC_URL: `irc://127.0.0.1:${port}`,
      HERALD_IRC_NICK: 'herald',
      HERALD_IRC_CHANNELS: '#agents',
      HERALD_IRC_ECHO_TIMEOUT_MS: '3000',
      HERALD_GATEWAY: 'off',
      HERALD_SINGLETON_TTL_MS: String(TTL),
      HERALD_SINGLETON_DOWN_MS: String(DOWN),
    });
    const start = (e: Record<string, string>) => rig.start(['serve'], e);
    const first = await parts.replica(start, db.databaseUrl ?? '', ircd.port, env);
    await waitFor(async () => (await observers()) === 1 && (await state(first)) === 'held', 'the first replica\'s observer in #agents', 30_000);
    const second = await parts.replica(start, db.databaseUrl ?? '', ircd.port, env);
    await waitFor(async () => (await state(second))?.startsWith('standby (held by ') === true, 'the second replica on standby', 15_000);
    expect(await observers()).toBe(1);
    return [first, second];
  }

  async function takenOverBy(to: Replica, sampler: Sampler): Promise<void> {
    await waitFor(async () => (await state(to)) === 'held' && (await observers()) === 1, 'the second replica\'s observer in #agents', 60_000);
    await sampler.stop();
  }

  it('a holder cut from the database closes its IRC connections before the other replica can take the lease over', async () => {
    const [first, second] = await pair();
    const sampler = new Sampler(observers, 50);
    const cut = performance.now();
    first.db.cut();
    await takenOverBy(second, sampler);
    const gone = sampler.firstAt(0, cut) ?? Infinity;
    const back = sampler.firstAt(1, gone) ?? Infinity;
    console.log(`irc:observer: the holder cut from PostgreSQL left the channel ${Math.round(gone - cut)} ms after the cut; the other replica's observer was in it ${Math.round(back - cut)} ms after it (ttl ${TTL} ms)`);
    expect(sampler.max).toBe(1);
    expect(gone - cut).toBeLessThan(TTL);
    expect(first.proc.child.exitCode).toBeNull();
  }, 120_000);

  it('a holder cut from the IRC server gives the lease up after HERALD_SINGLETON_DOWN_MS; the other replica takes the connections over', async () => {
    const [first, second] = await pair();
    const sampler = new Sampler(observers, 50);
    const cut = performance.now();
    first.platform.cut();
    await takenOverBy(second, sampler);
    const takeover = performance.now() - cut;
    console.log(`irc:observer: taken over from the holder cut from the IRC server in ${Math.round(takeover)} ms (HERALD_SINGLETON_DOWN_MS ${DOWN}, ttl ${TTL} ms)`);
    expect(sampler.max).toBe(1);
    expect(takeover).toBeLessThan(DOWN + 2 * TTL + 5_000);
    await waitFor(async () => /^standby \(held by .+\)$/.test((await state(first)) ?? ''), 'the first replica to see the second hold it', 5_000);
    // Healed and past its rest, the first bids again and stays on standby: one observer.
    first.platform.heal();
    const after = new Sampler(observers, 50);
    await new Promise((r) => setTimeout(r, DOWN + TTL));
    await after.stop();
    expect(after.max).toBeLessThanOrEqual(1);
    expect(await state(second)).toBe('held');
  }, 120_000);
});
