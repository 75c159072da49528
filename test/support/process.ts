import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface HeraldProcess {
  child: ChildProcess;
  /** The API's URL (serve only). */
  url: string | undefined;
  output(): string;
  /** Resolves with the exit code or signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal: NodeJS.Signals): void;
}

/** Run the real CLI (`herald serve|dispatch|…`) in a child process, as an operator would. */
export function runHerald(args: string[], env: Record<string, string>): HeraldProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const proc: HeraldProcess = {
    child,
    url: undefined,
    output: () => out,
    exited,
    kill: (signal) => child.kill(signal),
  };
  return proc;
}

/** Start `herald serve|dispatch` and wait until it logs that it started. */
export async function startHeraldProcess(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<HeraldProcess> {
  const proc = runHerald(args, env);
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
      throw new Error(`herald ${args.join(' ')} did not start in ${timeoutMs} ms (exit code ${proc.child.exitCode}):\n${proc.output()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
