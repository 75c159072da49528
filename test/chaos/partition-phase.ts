import pg from 'pg';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { sleep, type PhaseContext } from './campaign.js';
import type { PhaseExtras } from './phase-extras.js';
import type { Fleet } from './fleet.js';
import { Rng } from './prng.js';
import type { TakeoverReport } from './takeover.js';

/**
 * The `partitions` phase: Discord's posts, DMs and edits (the short nonce window) while replicas are
 * cut off from PostgreSQL, from Discord, or from both, and healed again, at times drawn from the
 * seed. Each Herald process reaches PostgreSQL and the Discord sandbox (REST and gateway) through
 * proxies of its own (test/support/tcp-proxy.ts); a cut drops its live connections and blackholes
 * new ones until the heal. No SIGKILLs and no PostgreSQL restarts: the partitions are the chaos.
 *
 * What must hold: a replica cut from the database stops sending once it cannot renew its leases,
 * before another's lease can begin (0 duplicates); a replica cut from Discord does not keep the
 * gateway it cannot use (the takeover times after cuts of the gateway's holder are reported).
 */

type Side = 'db' | 'discord' | 'both';

interface Cut {
  member: string;
  pid: number | undefined;
  side: Side;
  /** ms since the epoch. */
  at: number;
  healedAt?: number;
}

/** Between two cuts, and how long a cut lasts (ms): some shorter than the lease, most longer. */
const GAP_MS: readonly [number, number] = [2_000, 6_000];
const CUT_MS: readonly [number, number] = [1_500, 12_000];

export function partitionExtras(c: PhaseContext): PhaseExtras {
  const rng = new Rng(c.seed, 'partitions');
  const proxies = new Map<string, { db: TcpProxy; discord: TcpProxy }>();
  const cuts: Cut[] = [];
  let running = false;
  let loop: Promise<void> = Promise.resolve();
  let t0 = 0;
  let directDb = '';

  const cutMember = (member: string, side: Side, how: 'cut' | 'heal') => {
    const p = proxies.get(member);
    if (p === undefined) return;
    for (const proxy of side === 'both' ? [p.db, p.discord] : [p[side]]) proxy[how]();
  };

  return {
    // The sandbox names the host a client asked, so each replica's gateway goes through its proxy too.
    sandbox: {},
    async prepare({ sandbox, databaseUrl, specs }) {
      directDb = databaseUrl;
      const db = new URL(databaseUrl);
      const discordPort = Number(new URL(sandbox.url).port);
      for (const spec of specs) {
        const dbProxy = await startTcpProxy({ upstreamHost: db.hostname, upstreamPort: Number(db.port || 5432) });
        const discordProxy = await startTcpProxy({ upstreamPort: discordPort });
        proxies.set(spec.name, { db: dbProxy, discord: discordProxy });
        const own = new URL(databaseUrl);
        own.hostname = '127.0.0.1';
        own.port = String(dbProxy.port);
        spec.env['DATABASE_URL'] = own.toString();
        // REST through the proxy; the sandbox names the proxy's host as the gateway's too.
        spec.env['DISCORD_API_URL'] = `http://127.0.0.1:${discordProxy.port}/api`;
      }
    },
    keep: (e) => e.what === 'fault',
    start({ fleet, t0: phaseStart, log }) {
      t0 = phaseStart;
      running = true;
      const draw = rng.fork('schedule');
      const members = [...proxies.keys()];
      const open = new Set<string>();
      const healing: Promise<void>[] = [];
      loop = (async () => {
        while (running) {
          const end = Date.now() + draw.float(GAP_MS[0], GAP_MS[1]);
          while (running && Date.now() < end) await sleep(100);
          if (!running) break;
          // Often the gateway's holder: its takeover is what a cut must cause.
          const holder = draw.chance(0.4) ? await gatewayHolder(directDb, fleet) : undefined;
          const member = holder ?? draw.pick(members);
          const side = draw.weighted([
            ['db', 2],
            ['discord', 2],
            ['both', 1],
          ] as const);
          const ms = draw.int(CUT_MS[0], CUT_MS[1]);
          // One cut at a time per replica, and one replica always whole.
          if (open.has(member) || open.size >= members.length - 1) continue;
          open.add(member);
          const cut: Cut = { member, pid: pidOf(fleet, member), side, at: Date.now() };
          cuts.push(cut);
          cutMember(member, side, 'cut');
          log(`partition: ${member} (pid ${cut.pid ?? '-'}) cut from ${side === 'both' ? 'PostgreSQL and Discord' : side === 'db' ? 'PostgreSQL' : 'Discord'} for ${(ms / 1000).toFixed(1)}s`);
          healing.push(
            (async () => {
              const until = Date.now() + ms;
              while (running && Date.now() < until) await sleep(100);
              cutMember(member, side, 'heal');
              cut.healedAt = Date.now();
              open.delete(member);
              log(`partition: ${member} healed (${side})`);
            })(),
          );
        }
        await Promise.all(healing);
      })();
    },
    async drain() {
      running = false;
      await loop;
      for (const member of proxies.keys()) cutMember(member, 'both', 'heal');
    },
    notes: (takeovers) => partitionNotes(cuts, takeovers, t0),
    async close() {
      running = false;
      await Promise.all([...proxies.values()].flatMap((p) => [p.db.close(), p.discord.close()]));
    },
  };
}

/** The member holding the Discord gateway's lease now (its holder names the pid: `host:pid:…`). */
async function gatewayHolder(databaseUrl: string, fleet: Fleet): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 1_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ holder: string }>("select holder from singleton_leases where name = 'discord:gateway'");
    const pid = Number(rows[0]?.holder.split(':')[1]);
    return fleet.processes().find((p) => p.pid === pid)?.member;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

function pidOf(fleet: Fleet, member: string): number | undefined {
  return fleet.processes().find((p) => p.member === member)?.pid;
}

/**
 * The report's lines: cuts by side; for every cut of a singleton's holder (the Discord gateway, …),
 * how long until another process held it (from the cut), or that none did before the heal.
 */
export function partitionNotes(cuts: readonly Cut[], takeovers: TakeoverReport, t0: number): string[] {
  const bySide = { db: 0, discord: 0, both: 0 };
  for (const cut of cuts) bySide[cut.side] += 1;
  const lines = [`partitions: ${cuts.length} cuts (PostgreSQL ${bySide.db}, Discord ${bySide.discord}, both ${bySide.both}), each ${CUT_MS[0] / 1000}–${CUT_MS[1] / 1000} s`];
  for (const [name, leases] of Object.entries(takeovers.leases)) {
    const times: Record<Side, number[]> = { db: [], discord: [], both: [] };
    const kept: string[] = [];
    for (const cut of cuts) {
      if (cut.pid === undefined) continue;
      const who = `${cut.member}#${cut.pid}`;
      const atS = (cut.at - t0) / 1000;
      const holder = [...leases].reverse().find((l) => l.atS <= atS)?.holder;
      if (holder !== who) continue;
      const next = leases.find((l) => l.atS > atS && l.holder !== who);
      const healedS = ((cut.healedAt ?? Date.now()) - t0) / 1000;
      if (next !== undefined && next.atS <= healedS + 0.5) times[cut.side].push(Math.round((next.atS - atS) * 1000));
      else kept.push(`${cut.side} ${(healedS - atS).toFixed(1)}s`);
    }
    const parts = (Object.keys(times) as Side[]).map((side) => {
      const t = times[side].slice().sort((a, b) => a - b);
      return `${side}: ${t.length === 0 ? 'none' : `${t.length}, median ${t[Math.floor(t.length / 2)]} ms, max ${t[t.length - 1]} ms`}`;
    });
    lines.push(`takeover ${name} after a cut of its holder: ${parts.join('; ')}; kept by the cut holder until the heal: ${kept.length === 0 ? 'never' : kept.join(', ')}`);
  }
  return lines;
}
