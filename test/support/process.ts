import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TEST_NODE_FLAGS } from './node-flags.js';
import { trackProcessGroup } from './run-dir.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface HeraldProcess {
  child: ChildProcess;
  /** The API's URL (serve only). */
  url: string | undefined;
  output(): string;
  /** Resolves with the exit code or signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once every process holding its output (the whole group, e.g. npm and its child) is gone. */
  closed: Promise<void>;
  kill(signal: NodeJS.Signals): void;
}

export interface RunOptions {
  /**
   * Run the compiled CLI (bin/herald.js → dist/) instead of the sources through tsx. By default the
   * compiled one when dist/ is newer than every source (as after `npm ci`, which builds it): it starts
   * with about 1.5 s less CPU than tsx compiling the sources, and the suite starts some hundreds.
   */
  built?: boolean;
  /**
   * Node's flags for the child. By default the tests' (node-flags.ts: less CPU to start) under
   * vitest, and none elsewhere: `npm run bench` and `npm run chaos` measure Herald as operators
   * run it (with the tests' flags, PGlite's queries run on V8's baseline WebAssembly compiler only).
   */
  nodeFlags?: readonly string[];
}

/** The newest modification time (ms) of any file under `dir`. */
function newestUnder(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestUnder(p) : statSync(p).mtimeMs);
  }
  return newest;
}

let distFresh: boolean | undefined;
/** True when dist/ was built after the last change to the sources it is built from. */
export function distIsFresh(): boolean {
  if (distFresh === undefined) {
    try {
      const built = statSync(path.join(ROOT, 'dist/src/cli.js')).mtimeMs;
      distFresh = ['src', 'generated', 'migrations'].every((dir) => newestUnder(path.join(ROOT, dir)) < built);
    } catch {
      distFresh = false;
    }
  }
  return distFresh;
}

/** Children of this test file still running: killed after its last test, whatever happened. */
const running = new Set<HeraldProcess>();

export async function killRunningProcesses(): Promise<void> {
  const left = [...running];
  for (const proc of left) proc.kill('SIGKILL');
  await Promise.all(left.map((p) => p.closed));
}

/** Run the real CLI (`herald serve|dispatch|…`) in a child process, as an operator would (with the tests' V8 flags, node-flags.ts). */
export function runHerald(args: string[], env: Record<string, string>, options: RunOptions = {}): HeraldProcess {
  const flags = options.nodeFlags ?? (process.env['VITEST'] !== undefined ? TEST_NODE_FLAGS : []);
  const argv = (options.built ?? distIsFresh()) ? [...flags, 'bin/herald.js', ...args] : [...flags, '--import', 'tsx', 'src/cli.ts', ...args];
  return runCommand(process.execPath, argv, env);
}

/**
 * Run a command from the repository root in its own process group (`detached`), tracked until it
 * exits so the run's teardown kills it if a test did not (see run-dir.ts); kill() signals the
 * whole group, so a wrapper such as npm cannot leave its child behind.
 */
export function runCommand(command: string, args: string[], env: Record<string, string>): HeraldProcess {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  trackProcessGroup(child);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let isClosed = false;
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const proc: HeraldProcess = {
    child,
    url: undefined,
    output: () => out,
    exited,
    closed,
    kill: (signal) => {
      if (child.pid === undefined || isClosed) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // The group is gone already.
      }
    },
  };
  running.add(proc);
  void closed.then(() => {
    isClosed = true;
    running.delete(proc);
  });
  return proc;
}

/** Start `herald serve|dispatch` and wait until it logs that it started. */
export async function startHeraldProcess(args: string[], env: Record<string, string>, timeoutMs = 60_000, options: RunOptions = {}): Promise<HeraldProcess> {
  return awaitStarted(runHerald(args, env, options), `herald ${args.join(' ')}`, timeoutMs);
}

/** Wait until a started process logs "herald started" (its url is kept); killed if it exits or takes too long. */
export async function awaitStarted(proc: HeraldProcess, what: string, timeoutMs = 60_000): Promise<HeraldProcess> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = proc
      .output()
      .split('\n')
      .find((l) => l.includes('"msg":"herald started"'));
    if (line !== undefined) {
      const url = (JSON.parse(line) as { url?: string }).url;
      proc.url = url;
      return proc;
    }
    if (proc.child.exitCode !== null || Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`${what} did not start in ${timeoutMs} ms (exit code ${proc.child.exitCode}):\n${proc.output()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What an `afterEach` hook's context says about the test that just ran. */
export interface FinishedTest {
  task: { result?: { state?: string } | undefined };
}

/**
 * The Herald processes of one describe block's tests (crash and restart tests): call `stopAll`
 * from `afterEach`. Each test's processes are then stopped, SIGKILL to the whole group and their
 * exit awaited, so the next test starts clean; a failed test prints what they said first.
 */
export interface ProcessHarness {
  /** Start `herald <args>` (startHeraldProcess) and keep it. */
  start(args: string[], env: Record<string, string>, timeoutMs?: number, options?: RunOptions): Promise<HeraldProcess>;
  /** Keep a process started otherwise (e.g. runHerald, for a Herald that is not expected to start). */
  track(proc: HeraldProcess): HeraldProcess;
  stopAll(test: FinishedTest): Promise<void>;
}

export function processHarness(): ProcessHarness {
  const procs: HeraldProcess[] = [];
  const track = (proc: HeraldProcess): HeraldProcess => {
    procs.push(proc);
    return proc;
  };
  return {
    track,
    start: async (args, env, timeoutMs, options) => track(await startHeraldProcess(args, env, timeoutMs, options)),
    async stopAll(test) {
      if (test.task.result?.state === 'fail') for (const p of procs) console.error(`--- herald output ---\n${p.output()}`);
      for (const p of procs.splice(0)) {
        if (p.child.exitCode === null && p.child.signalCode === null) p.kill('SIGKILL');
        await p.exited;
      }
    },
  };
}
