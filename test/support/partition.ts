import { afterEach } from 'vitest';
import { client } from './client.js';
import type { HeraldProcess } from './process.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

/**
 * Replicas behind TCP proxies, for the partition tests of the connections one replica holds: each
 * replica reaches PostgreSQL through a proxy of its own and the platform through another, so a test
 * cuts one replica from either and leaves the other replica's links alone. Proxies are closed after
 * each test (the rig's own hooks kill the processes and drop the database).
 */
export interface Replica {
  proc: HeraldProcess;
  /** Between this replica and PostgreSQL. */
  db: TcpProxy;
  /** Between this replica and the platform sandbox. */
  platform: TcpProxy;
}

export interface PartitionRig {
  /**
   * Start a replica: `databaseUrl` and `platformPort` are reached through new proxies, and
   * `start` is given the environment (the database URL through its proxy, and `platformEnv` of
   * the platform proxy's port).
   */
  replica(
    start: (env: Record<string, string>) => Promise<HeraldProcess>,
    databaseUrl: string,
    platformPort: number,
    platformEnv: (port: number) => Record<string, string>,
  ): Promise<Replica>;
}

export function partitionRig(): PartitionRig {
  const proxies: TcpProxy[] = [];
  afterEach(async () => {
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });
  return {
    async replica(start, databaseUrl, platformPort, platformEnv) {
      const url = new URL(databaseUrl);
      const db = await startTcpProxy({ upstreamHost: url.hostname, upstreamPort: Number(url.port || 5432) });
      proxies.push(db);
      const platform = await startTcpProxy({ upstreamPort: platformPort });
      proxies.push(platform);
      url.hostname = '127.0.0.1';
      url.port = String(db.port);
      const proc = await start({ DATABASE_URL: url.toString(), ...platformEnv(platform.port) });
      return { proc, db, platform };
    },
  };
}

/** The port of an http(s) URL. */
export function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** A replica's `singletons` in /readyz (undefined when it does not answer in time). */
export async function singletonState(p: HeraldProcess, bridgeToken: string, name: string): Promise<string | undefined> {
  try {
    const res = await client(p.url ?? '', bridgeToken).get('/readyz');
    return (res.json as { singletons?: Record<string, string> }).singletons?.[name];
  } catch {
    return undefined;
  }
}

/**
 * Samples a count (open sessions, sockets, observers) until stopped: the most seen at once, and
 * when (performance.now()) it was first seen at a value after a given moment.
 */
export class Sampler {
  private readonly seen: { at: number; n: number }[] = [];
  private running = true;
  private readonly loop: Promise<void>;

  constructor(
    private readonly sample: () => number | Promise<number>,
    everyMs = 20,
  ) {
    this.loop = (async () => {
      while (this.running) {
        const n = await sample();
        this.seen.push({ at: performance.now(), n });
        await new Promise((r) => setTimeout(r, everyMs));
      }
    })();
  }

  get max(): number {
    return Math.max(0, ...this.seen.map((s) => s.n));
  }

  /** When the count was first `n` after `after`, or undefined. */
  firstAt(n: number, after: number): number | undefined {
    return this.seen.find((s) => s.at > after && s.n === n)?.at;
  }

  /** Stop, after one last sample (what the caller just waited for is seen). */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    this.seen.push({ at: performance.now(), n: await this.sample() });
  }
}
