import { readFileSync } from 'node:fs';
import { FAULT_POINTS, type FaultPoint } from '../../src/infra/faults/fault-points.js';
import type { Rng } from './prng.js';

/**
 * Pauses: Herald processes stalled longer than their lease (as a long GC pause, a stalled VM or
 * `SIGSTOP` would), then continued, carrying on with what they were doing as if no time had passed.
 *
 * Three ways a process comes to be stopped, all counted by where:
 * - at a fault point (src/infra/faults/fault-points.ts): started with HERALD_FAULT_POINTS, the process
 *   stops itself just before a request leaves (`before-send`), between the platform's answer and its
 *   commit (`after-answer`), or just before the commit (`before-commit`). Each member gets one point
 *   (`faultPointsEnv`), so the point a stopped process stopped at is known by its member;
 * - `scheduled`: the campaign SIGSTOPs a random process, whatever it is doing;
 * - `create-in-flight`: the campaign SIGSTOPs a process whose create the platform sandbox holds.
 *
 * The watch reads /proc/<pid>/stat a few times a second; a process found stopped (state `T`) is
 * continued (`SIGCONT`) after the lease plus 2–24 s, drawn from the seed.
 */

export type PausePoint = FaultPoint | 'scheduled' | 'create-in-flight';
export const PAUSE_POINTS: readonly PausePoint[] = [...FAULT_POINTS, 'scheduled', 'create-in-flight'];

/** The processes a phase runs now, by member. */
export interface Paused {
  processes(): { member: string; pid: number }[];
}

/** HERALD_FAULT_POINTS for the member at `index`: one point each, in turn, with probability `p`. */
export function faultPointsEnv(index: number, p: number): Record<string, string> {
  const point = FAULT_POINTS[index % FAULT_POINTS.length] as FaultPoint;
  return { HERALD_FAULT_POINTS: `${point}=${p}` };
}

/** The point a member's process stops itself at (from its HERALD_FAULT_POINTS), if any. */
export function memberPoint(env: Record<string, string>): FaultPoint | undefined {
  const name = (env['HERALD_FAULT_POINTS'] ?? '').split('=')[0]?.trim();
  return (FAULT_POINTS as readonly string[]).includes(name ?? '') ? (name as FaultPoint) : undefined;
}

/** A process's state letter from /proc/<pid>/stat (`T`: stopped), or undefined when it is gone. */
export function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // pid (comm) S …: the comm may hold spaces and parentheses; the state follows the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return undefined;
  }
}

interface Pause {
  member: string;
  pid: number;
  point: PausePoint;
  from: number;
  ms: number;
  timer: NodeJS.Timeout;
}

export interface PauseReport {
  /** Pauses by where the process stopped. */
  byPoint: Record<PausePoint, number>;
  /** Every pause's length (ms), longest first. */
  longestMs: number;
  totalMs: number;
  /** Processes killed while stopped (by the schedule or the settle) before their SIGCONT. */
  endedWhileStopped: number;
}

export class PauseWatch {
  private readonly paused = new Map<number, Pause>();
  private readonly done: Pause[] = [];
  private endedWhileStopped = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly fleet: Paused,
    private readonly rng: Rng,
    private readonly leaseMs: number,
    private readonly pointOf: (member: string) => FaultPoint | undefined,
    private readonly log: (line: string) => void,
  ) {
    this.timer = setInterval(() => this.scan(), 50);
  }

  /** Stop `member`'s process now (the campaign's own pause); false when it is not running or already stopped. */
  stop(member: string, point: 'scheduled' | 'create-in-flight'): boolean {
    const proc = this.fleet.processes().find((p) => p.member === member);
    if (proc === undefined || this.paused.has(proc.pid)) return false;
    try {
      process.kill(proc.pid, 'SIGSTOP');
    } catch {
      return false;
    }
    this.begin(proc.member, proc.pid, point);
    return true;
  }

  /** The processes running now and not stopped. */
  running(): { member: string; pid: number }[] {
    return this.fleet.processes().filter((p) => !this.paused.has(p.pid));
  }

  /** A member's process, picked at random among those running, not stopped and allowed by `may`. */
  pickRunning(may: (member: string) => boolean = () => true): string | undefined {
    const running = this.running().filter((p) => may(p.member));
    return running.length === 0 ? undefined : this.rng.pick(running).member;
  }

  private scan(): void {
    const live = new Set<number>();
    for (const { member, pid } of this.fleet.processes()) {
      live.add(pid);
      if (this.paused.has(pid)) continue;
      if (processState(pid) !== 'T') continue;
      this.begin(member, pid, this.pointOf(member) ?? 'scheduled');
    }
    // A process killed while stopped: nothing left to continue.
    for (const [pid, pause] of this.paused) {
      if (live.has(pid) && processState(pid) !== undefined) continue;
      clearTimeout(pause.timer);
      this.paused.delete(pid);
      this.endedWhileStopped += 1;
      this.done.push({ ...pause, ms: Date.now() - pause.from });
    }
  }

  private begin(member: string, pid: number, point: PausePoint): void {
    const ms = this.leaseMs + this.rng.int(2_000, 24_000);
    const timer = setTimeout(() => this.resume(pid), ms);
    this.paused.set(pid, { member, pid, point, from: Date.now(), ms, timer });
    this.log(`pause ${member} (pid ${pid}) at ${point} for ${(ms / 1000).toFixed(1)}s`);
  }

  private resume(pid: number): void {
    const pause = this.paused.get(pid);
    if (pause === undefined) return;
    this.paused.delete(pid);
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // gone meanwhile
    }
    this.done.push({ ...pause, ms: Date.now() - pause.from });
    this.log(`continue ${pause.member} (pid ${pid}) after ${((Date.now() - pause.from) / 1000).toFixed(1)}s (${pause.point})`);
  }

  /** Whether some process was stopped at `at` (Date.now() time), or was continued less than `graceMs` before it. */
  stalledAround(at: number, graceMs: number): boolean {
    const now = Date.now();
    return [...this.done, ...this.paused.values()].some((p) => {
      const until = this.paused.get(p.pid) === p ? now : p.from + p.ms;
      return at >= p.from && at <= until + graceMs;
    });
  }

  /** Processes stopped now. */
  get stopped(): number {
    return this.paused.size;
  }

  /** Continue every process stopped now (their pauses end early) and stop watching. */
  end(): PauseReport {
    clearInterval(this.timer);
    for (const pid of [...this.paused.keys()]) this.resume(pid);
    return this.report();
  }

  report(): PauseReport {
    const byPoint = Object.fromEntries(PAUSE_POINTS.map((p) => [p, 0])) as Record<PausePoint, number>;
    for (const p of [...this.done, ...this.paused.values()]) byPoint[p.point] += 1;
    const lengths = this.done.map((p) => p.ms);
    return { byPoint, longestMs: lengths.length > 0 ? Math.max(...lengths) : 0, totalMs: lengths.reduce((a, b) => a + b, 0), endedWhileStopped: this.endedWhileStopped };
  }
}

/** The report's line for a phase's pauses. */
export function pauseNote(r: PauseReport, leaseMs: number): string {
  const n = Object.values(r.byPoint).reduce((a, b) => a + b, 0);
  return `pauses: ${n} (${PAUSE_POINTS.map((p) => `${p} ${r.byPoint[p]}`).join(', ')}), each the lease (${leaseMs} ms) plus 2–24 s; longest ${(r.longestMs / 1000).toFixed(1)}s; ${r.endedWhileStopped} ended while stopped`;
}

/** Each fault point's probability at each pass (each member has one point). */
export const FAULT_POINT_P = 0.05;
/** Between two of the campaign's own pauses (ms). */
const PLAN_GAP_MS: readonly [number, number] = [3_000, 8_000];

/**
 * A phase's pauses, whatever its platform: each member gets its fault point (`prepare`), the
 * campaign adds its own pauses at seeded times (`start`; `extra` may take some turns, e.g. to stop
 * a process with a create in flight), and at the end every pause runs its course before the settle
 * restarts the processes without fault points (`drain`). Its own pauses leave one `serve` process
 * answering the API (the connectors need one; a process stopping itself may still take the last).
 */
export class PausePlan {
  private watch: PauseWatch | undefined;
  private running = false;
  private loop: Promise<void> = Promise.resolve();
  private readonly points = new Map<string, FaultPoint | undefined>();

  constructor(
    private readonly rng: Rng,
    readonly leaseMs: number,
  ) {}

  prepare(specs: readonly { name: string; env: Record<string, string> }[]): void {
    for (const [i, spec] of specs.entries()) {
      Object.assign(spec.env, faultPointsEnv(i, FAULT_POINT_P));
      this.points.set(spec.name, memberPoint(spec.env));
    }
  }

  /** Whether the campaign may stop this member's process now. */
  mayStop(member: string): boolean {
    return !member.startsWith('serve') || (this.watch?.running().filter((p) => p.member.startsWith('serve')).length ?? 0) > 1;
  }

  stop(member: string, point: 'scheduled' | 'create-in-flight'): boolean {
    return this.mayStop(member) && this.watch?.stop(member, point) === true;
  }

  /** `extra`, when given, takes about half the turns; it answers once its turn is over. */
  start(fleet: Paused, log: (line: string) => void, extra?: (draw: Rng) => Promise<void>): void {
    const w = new PauseWatch(fleet, this.rng.fork('lengths'), this.leaseMs, (member) => this.points.get(member), log);
    this.watch = w;
    this.running = true;
    const draw = this.rng.fork('schedule');
    this.loop = (async () => {
      while (this.running) {
        const end = Date.now() + draw.float(PLAN_GAP_MS[0], PLAN_GAP_MS[1]);
        while (this.running && Date.now() < end) await sleepMs(100);
        if (!this.running) return;
        // Leave one process running at least: the campaign pauses processes, it does not stop the service.
        if (w.stopped >= fleet.processes().length - 1) continue;
        if (extra !== undefined && draw.chance(0.5)) {
          await extra(draw);
          continue;
        }
        const member = w.pickRunning((m) => this.mayStop(m));
        if (member !== undefined) w.stop(member, 'scheduled');
      }
    })();
  }

  get isRunning(): boolean {
    return this.running;
  }

  /** The chaos is over: no new pauses of the campaign's; every pause runs its course; fault points off for the settle. */
  async drain(specs: readonly { env: Record<string, string> }[]): Promise<void> {
    this.running = false;
    await this.loop;
    const w = this.watch;
    if (w !== undefined) {
      const until = Date.now() + this.leaseMs + 27_000;
      while (w.stopped > 0 && Date.now() < until) await sleepMs(100);
      w.end();
    }
    for (const spec of specs) delete spec.env['HERALD_FAULT_POINTS'];
  }

  /** Whether some process was stopped at `at` (Date.now() time), or was continued less than `graceMs` before it. */
  stalledAround(at: number, graceMs: number): boolean {
    return this.watch?.stalledAround(at, graceMs) === true;
  }

  note(): string[] {
    const r = this.watch?.report();
    return r === undefined ? [] : [pauseNote(r, this.leaseMs)];
  }

  close(): void {
    this.running = false;
    this.watch?.end();
  }
}

function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
