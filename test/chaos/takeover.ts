import pg from 'pg';
import type { Fleet } from './fleet.js';
import { sleep } from './campaign.js';

/**
 * How the connections held once (the Discord gateway, the IRC observer: src/platforms/singletons.ts)
 * passed between processes during a phase, read from their leases (`singleton_leases`) a few times a
 * second, and how long the Discord gateway was without any session (the nonce ledger's gap: only a
 * gateway session records the nonces Herald's creates carried).
 */

export interface Handover {
  name: string;
  /** The process that held it before, as `member#pid`, and how it ended. */
  from: string;
  to: string;
  /**
   * From the old holder's SIGKILL, or from when a standby was up if none was then, to the new lease
   * (ms); undefined when the old holder was not killed by the chaos.
   */
  afterKillMs: number | undefined;
  /** How long after the SIGKILL the first standby that stayed up was up, when none was at the kill (ms). */
  noStandbyMs: number;
  /** When the new holder took the lease (s since the phase began). */
  atS: number;
  /**
   * The old holder's process was still running when the new one took the lease: it had stopped
   * renewing (e.g. PostgreSQL down), and for a moment two processes may have believed they held it.
   */
  oldHolderUp: boolean;
}

export interface TakeoverReport {
  handovers: Handover[];
  /** Takeover times after a SIGKILL of the holder, by name. */
  afterKill: Record<string, number[]>;
  /** Periods with no gateway session (ms), with the creates the sandbox answered in them. */
  gatewayGaps: { ms: number; creates: number }[];
  /** Every lease seen, by name, in order: its holder (`member#pid`) and when it was taken (s since the phase began). */
  leases: Record<string, { holder: string; atS: number }[]>;
}

interface Lease {
  holder: string;
  acquiredAt: number;
}

export class TakeoverWatch {
  private readonly seen = new Map<string, Lease[]>();
  private readonly gaps: { from: number; until?: number }[] = [];
  private running = true;
  private settlingFrom = Infinity;
  private readonly loops: Promise<void>[] = [];

  /**
   * `gatewaySessions` answers the sandbox's identified sessions now (omit it where the phase has no
   * Discord gateway); `createTimes` the times (ms since the epoch) of the creates it answered.
   */
  constructor(
    private readonly databaseUrl: string,
    private readonly fleet: Fleet,
    private readonly t0: number,
    private readonly gatewaySessions?: () => number,
  ) {
    this.loops.push(this.watchLeases());
    if (gatewaySessions !== undefined) this.loops.push(this.watchGateway(gatewaySessions));
  }

  private async watchLeases(): Promise<void> {
    while (this.running) {
      const client = new pg.Client({ connectionString: this.databaseUrl, connectionTimeoutMillis: 1_000 });
      try {
        // A broken connection (PostgreSQL restarted) ends this client; the loop opens another.
        client.on('error', () => undefined);
        await client.connect();
        while (this.running) {
          const { rows } = await client.query<{ name: string; holder: string; acquired_at: Date }>('select name, holder, acquired_at from singleton_leases');
          for (const r of rows) {
            const list = this.seen.get(r.name) ?? [];
            const last = list[list.length - 1];
            const acquiredAt = r.acquired_at.getTime();
            if (last === undefined || last.holder !== r.holder || last.acquiredAt !== acquiredAt) list.push({ holder: r.holder, acquiredAt });
            this.seen.set(r.name, list);
          }
          await sleep(200);
        }
      } catch {
        await sleep(300);
      } finally {
        await client.end().catch(() => undefined);
      }
    }
  }

  private async watchGateway(sessions: () => number): Promise<void> {
    while (this.running) {
      const now = Date.now();
      const open = this.gaps[this.gaps.length - 1];
      const none = sessions() === 0;
      if (none && (open === undefined || open.until !== undefined)) this.gaps.push({ from: now });
      if (!none && open !== undefined && open.until === undefined) open.until = now;
      await sleep(100);
    }
  }

  /**
   * The chaos is over: the processes killed from now on (every one, to settle) are not takeovers
   * the chaos caused, and are counted with the other handovers.
   */
  settling(): void {
    this.settlingFrom = Date.now();
  }

  /** Stop watching; `createTimes` are the sandbox's creates (ms since the epoch), counted per gap. */
  async stop(createTimes: readonly number[] = []): Promise<TakeoverReport> {
    this.running = false;
    await Promise.all(this.loops);
    const handovers: Handover[] = [];
    const afterKill: Record<string, number[]> = {};
    for (const [name, leases] of this.seen) {
      for (let i = 1; i < leases.length; i++) {
        const before = leases[i - 1] as Lease;
        const after = leases[i] as Lease;
        if (before.holder === after.holder) continue;
        const old = this.incarnationOf(before.holder);
        const ended = old?.end?.killed === true && old.endedAt !== undefined ? this.t0 + old.endedAt : undefined;
        const killedAt = ended !== undefined && ended < this.settlingFrom ? ended : undefined;
        // The clock starts when the holder was dead and another process that could take over was up
        // (a standby of the new holder's kind that stayed up until it did): a standby itself killed,
        // or still starting, is no takeover Herald could make.
        const standbyAt = killedAt === undefined ? undefined : this.standbySince(before.holder, after.holder, killedAt, after.acquiredAt);
        const from = killedAt === undefined || standbyAt === undefined ? undefined : Math.max(killedAt, standbyAt);
        const afterKillMs = from !== undefined && from <= after.acquiredAt ? after.acquiredAt - from : undefined;
        const noStandbyMs = from !== undefined && killedAt !== undefined ? from - killedAt : 0;
        const oldHolderUp = old !== undefined && (old.endedAt === undefined || this.t0 + old.endedAt > after.acquiredAt);
        handovers.push({ name, from: this.describe(before.holder), to: this.describe(after.holder), afterKillMs, noStandbyMs, atS: (after.acquiredAt - this.t0) / 1000, oldHolderUp });
        if (afterKillMs !== undefined) (afterKill[name] ??= []).push(afterKillMs);
      }
    }
    // Gaps the chaos made: not the settle's restart of every process.
    const gatewayGaps = this.gaps
      .filter((g) => g.until !== undefined && g.from < this.settlingFrom)
      .map((g) => ({ until: Math.min(g.until as number, this.settlingFrom), from: g.from }))
      .map((g) => ({ ms: g.until - g.from, creates: createTimes.filter((t) => t >= g.from && t <= g.until).length }));
    const leases: Record<string, { holder: string; atS: number }[]> = {};
    for (const [name, list] of this.seen) leases[name] = list.map((l) => ({ holder: this.describe(l.holder), atS: (l.acquiredAt - this.t0) / 1000 }));
    return { handovers, afterKill, gatewayGaps, leases };
  }

  /** When the earliest process like `next` (its member's kind), other than `previous`, that was up until `until` came up (ms since the epoch). */
  private standbySince(previous: string, next: string, killedAt: number, until: number): number | undefined {
    const old = this.incarnationOf(previous);
    const kind = this.incarnationOf(next)?.member.replace(/-\d+$/, '');
    if (kind === undefined) return undefined;
    const ready = this.fleet.incarnations
      .filter((inc) => inc !== old && inc.member.replace(/-\d+$/, '') === kind && inc.readyAt !== undefined)
      .filter((inc) => inc.endedAt === undefined || this.t0 + inc.endedAt >= until)
      .map((inc) => Math.max(killedAt, this.t0 + (inc.readyAt as number)));
    return ready.length > 0 ? Math.min(...ready) : undefined;
  }

  private incarnationOf(holder: string) {
    const pid = Number(holder.split(':')[1]);
    return this.fleet.incarnations.find((inc) => inc.pid === pid);
  }

  private describe(holder: string): string {
    const inc = this.incarnationOf(holder);
    return inc === undefined ? holder : `${inc.member}#${inc.pid ?? '-'}`;
  }
}

/** The report's lines: takeover times after SIGKILLs by name, and the gateway's gaps. */
export function takeoverNotes(r: TakeoverReport): string[] {
  const lines: string[] = [];
  const names = new Set([...r.handovers.map((h) => h.name)]);
  for (const name of [...names].sort()) {
    const times = (r.afterKill[name] ?? []).slice().sort((a, b) => a - b);
    const other = r.handovers.filter((h) => h.name === name && h.afterKillMs === undefined).length;
    const oldUp = r.handovers.filter((h) => h.name === name && h.oldHolderUp).length;
    lines.push(
      `takeover ${name}: ${times.length > 0 ? `${times[times.length - 1]} ms (max), median ${times[Math.floor(times.length / 2)]} ms, over ${times.length} handovers after a SIGKILL of its holder (timed from when a standby was up)` : 'no handover after a SIGKILL of its holder'}; ${other} other handovers (a holder that lost PostgreSQL, or every process restarted to settle); ${oldUp} with the old holder still running`,
    );
  }
  for (const h of r.handovers) lines.push(`  handover ${h.name} at ${h.atS.toFixed(1)}s: ${h.from} → ${h.to}${h.afterKillMs !== undefined ? `, ${h.afterKillMs} ms after its SIGKILL${h.noStandbyMs > 0 ? ` and a standby up (none was, for ${h.noStandbyMs} ms)` : ''}` : ''}${h.oldHolderUp ? ' (the old holder still running)' : ''}`);
  if (r.gatewayGaps.length > 0) {
    const longest = Math.max(...r.gatewayGaps.map((g) => g.ms));
    const creates = r.gatewayGaps.reduce((n, g) => n + g.creates, 0);
    lines.push(`nonce-ledger gap: ${r.gatewayGaps.length} periods of the chaos without a gateway session, longest ${longest} ms; ${creates} creates answered in them (their doubts settled by history, not the ledger)`);
  }
  return lines;
}
