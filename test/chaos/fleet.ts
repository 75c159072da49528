import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { runCommand, runHerald, type HeraldProcess } from '../support/process.js';

/**
 * The Herald processes of one phase (`herald serve` and `herald dispatch` on one database), kept
 * running: the campaign SIGKILLs them on its schedule and restarts them; one that exits by itself
 * (a crash) is recorded with the end of its output and restarted too.
 */

export interface MemberSpec {
  name: string;
  command: 'serve' | 'dispatch';
  env: Record<string, string>;
  /**
   * A TypeScript module (from the repository root) to run as the process's main module through
   * tsx, with `command` as its argument, instead of the CLI (archive-member.ts).
   */
  entry?: string;
}

/** One process lifetime of a member, for the report. */
export interface Incarnation {
  member: string;
  pid: number | undefined;
  startedAt: number;
  /** When it said it had started (ms since the phase began). */
  readyAt?: number;
  endedAt?: number;
  /** How it ended: killed by the campaign, or on its own (a crash). */
  end?: { killed: boolean; code: number | null; signal: string | null };
  output: () => string;
}

export interface Crash {
  member: string;
  pid: number | undefined;
  at: number;
  code: number | null;
  signal: string | null;
  /** The last lines it printed. */
  tail: string[];
}

class Member {
  proc: HeraldProcess | undefined;
  /** Up: it said "herald started" and has not exited. */
  up = false;
  starting: Promise<void> | undefined;
  constructor(readonly spec: MemberSpec) {}
}

export class Fleet {
  private readonly members: Member[];
  private stopped = false;
  /** Processes the campaign ended on purpose (anything else that exits crashed). */
  private readonly killed = new WeakSet<HeraldProcess>();
  readonly incarnations: Incarnation[] = [];
  readonly crashes: Crash[] = [];
  /** Failed start-ups (e.g. while PostgreSQL is down): retried, counted here. */
  startFailures = 0;
  kills = 0;

  constructor(
    specs: MemberSpec[],
    private readonly log: (line: string) => void,
    private readonly pidFile: string,
    private readonly t0: number,
  ) {
    this.members = specs.map((s) => new Member(s));
  }

  get size(): number {
    return this.members.length;
  }

  /** Base URLs of the `serve` processes up now. */
  serveUrls(): string[] {
    return this.members.flatMap((m) => (m.spec.command === 'serve' && m.up && m.proc?.url !== undefined ? [m.proc.url] : []));
  }

  /** Each member's running process now (started or starting), by member name. */
  processes(): { member: string; pid: number }[] {
    return this.members.flatMap((m) => {
      const pid = m.proc?.child.pid;
      return pid !== undefined && m.proc?.child.exitCode === null && m.proc.child.signalCode === null ? [{ member: m.spec.name, pid }] : [];
    });
  }

  async startAll(): Promise<void> {
    this.stopped = false;
    await Promise.all(this.members.map((m) => this.ensureStarted(m)));
  }

  /**
   * SIGKILL member `index` and start it again (in the background). A member still starting up is
   * spared for the next one that is up, so the processes spend their time running, not booting.
   */
  async killAndRestart(index: number): Promise<string | undefined> {
    const n = this.members.length;
    const m = Array.from({ length: n }, (_, k) => this.members[(index + k) % n]).find((x) => x?.up === true);
    if (m === undefined) return undefined;
    const pid = m.proc?.child.pid;
    await this.kill(m);
    this.kills += 1;
    void this.ensureStarted(m);
    return `${m.spec.name} (pid ${pid ?? '-'})`;
  }

  /** SIGKILL every process and start them all again; resolves when all are up. */
  async restartAll(): Promise<void> {
    await Promise.all(this.members.map((m) => this.kill(m)));
    await this.startAll();
  }

  /** From now on no process is restarted (call before ending the processes some other way). */
  halt(): void {
    this.stopped = true;
  }

  /** SIGKILL every process and start none again. */
  async stopAll(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.members.map((m) => this.kill(m)));
    await Promise.all(this.members.map((m) => m.starting?.catch(() => undefined)));
    await Promise.all(this.members.map((m) => this.kill(m)));
    this.writePids();
  }

  private async kill(m: Member): Promise<void> {
    const proc = m.proc;
    if (proc === undefined) return;
    this.killed.add(proc);
    m.up = false;
    if (proc.child.exitCode === null && proc.child.signalCode === null) proc.kill('SIGKILL');
    await proc.exited;
    if (m.proc === proc) m.proc = undefined;
    this.writePids();
  }

  private ensureStarted(m: Member): Promise<void> {
    m.starting ??= this.startLoop(m).finally(() => (m.starting = undefined));
    return m.starting;
  }

  private async startLoop(m: Member): Promise<void> {
    for (let attempt = 0; !this.stopped; attempt++) {
      if (m.proc !== undefined && m.proc.child.exitCode === null) return;
      try {
        const proc = await this.spawn(m);
        if (this.stopped) {
          proc.kill('SIGKILL');
          await proc.exited;
        }
        return;
      } catch (err) {
        if (this.stopped) return;
        const message = err instanceof Error ? err.message : String(err);
        if (!message.startsWith('killed while starting')) {
          this.startFailures += 1;
          this.log(`  ${m.spec.name} did not start (${message.slice(0, 200)}); retrying`);
          await sleep(Math.min(3_000, 300 * (attempt + 1)));
        }
      }
    }
  }

  private async spawn(m: Member): Promise<HeraldProcess> {
    // Registered before start-up completes, so a kill during start-up (e.g. mid-migration) finds it.
    const p = m.spec.entry !== undefined ? runCommand(process.execPath, ['--import', 'tsx', m.spec.entry, m.spec.command], m.spec.env) : runHerald([m.spec.command], m.spec.env);
    m.proc = p;
    this.writePids();
    const inc: Incarnation = { member: m.spec.name, pid: p.child.pid, startedAt: Date.now() - this.t0, output: () => p.output() };
    this.incarnations.push(inc);
    let up = false;
    void p.exited.then(({ code, signal }) => {
      const killed = this.killed.has(p) || this.stopped;
      if (m.proc === p) m.up = false;
      inc.endedAt = Date.now() - this.t0;
      inc.end = { killed, code, signal };
      if (m.proc === p) m.proc = undefined;
      this.writePids();
      // A process that dies after it started, and not by our hand, crashed: restart it.
      if (!killed && up) {
        const tail = p.output().trimEnd().split('\n').slice(-30);
        this.crashes.push({ member: m.spec.name, pid: p.child.pid, at: Date.now() - this.t0, code, signal, tail });
        this.log(`  ! ${m.spec.name} (pid ${p.child.pid}) exited by itself: code ${code} signal ${signal}; restarting`);
        void sleep(300).then(() => this.ensureStarted(m));
      }
    });
    const deadline = Date.now() + 60_000;
    for (;;) {
      const line = p
        .output()
        .split('\n')
        .find((l) => l.includes('"msg":"herald started"'));
      if (line !== undefined) {
        p.url = (JSON.parse(line) as { url?: string }).url;
        inc.readyAt = Date.now() - this.t0;
        up = true;
        m.up = true;
        return p;
      }
      if (p.child.exitCode !== null || p.child.signalCode !== null || Date.now() > deadline) {
        if (p.child.exitCode === null && p.child.signalCode === null) p.kill('SIGKILL');
        await p.exited;
        const why = this.killed.has(p) ? 'killed while starting' : `exit ${p.child.exitCode ?? p.child.signalCode}`;
        throw new Error(`${why}: ${p.output().trimEnd().split('\n').slice(-2).join(' | ')}`);
      }
      await sleep(50);
    }
  }

  /** The watchdog reads this file if the campaign dies without cleaning up. */
  private writePids(): void {
    const pids = this.members.flatMap((m) => (m.proc?.child.pid !== undefined ? [m.proc.child.pid] : []));
    try {
      writeFileSync(this.pidFile, pids.join('\n') + '\n');
    } catch {
      // the work folder is gone: nothing left to guard
    }
  }
}

/**
 * A detached shell that outlives a SIGKILLed campaign: when this process is gone it SIGKILLs the
 * Herald processes listed in `pidFile` and removes `workDir`. Returns a function that ends it.
 */
export function startWatchdog(pidFile: string, workDir: string): () => void {
  const script = `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; for p in $(cat '${pidFile}' 2>/dev/null); do kill -9 "$p" 2>/dev/null; done; rm -rf '${workDir}'`;
  const dog = spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' });
  dog.unref();
  return () => {
    try {
      if (dog.pid !== undefined) process.kill(-dog.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
