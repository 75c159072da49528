import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';

/**
 * One folder per `npm test` run (global-setup.ts makes it and points TMPDIR at it, so every temp
 * folder a test makes lands inside), holding a file per child process still running. The run's
 * teardown kills what is listed and removes the folder: nothing outlives the suite, even a test
 * that timed out before its own cleanup ran.
 */
export const RUN_DIR_VARIABLE = 'HERALD_TEST_RUN_DIR';

function pidDir(): string | undefined {
  const dir = process.env[RUN_DIR_VARIABLE];
  return dir === undefined || dir === '' ? undefined : path.join(dir, 'pids');
}

/** Record a child spawned `detached` (leader of its own process group) until it exits. */
export function trackProcessGroup(child: ChildProcess): void {
  const dir = pidDir();
  const pid = child.pid;
  if (dir === undefined || pid === undefined) return;
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, String(pid));
  writeFileSync(file, '');
  // 'close': every process holding its output has exited, not only the leader.
  child.once('close', () => rmSync(file, { force: true }));
}

/** Kill every process group still listed (SIGKILL: the run is over). */
export function killTrackedProcessGroups(runDir: string): number[] {
  const dir = path.join(runDir, 'pids');
  let pids: number[] = [];
  try {
    pids = readdirSync(dir).map(Number).filter((n) => Number.isInteger(n) && n > 1);
  } catch {
    return [];
  }
  const killed: number[] = [];
  for (const pid of pids) {
    try {
      process.kill(-pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // Already gone.
    }
    rmSync(path.join(dir, String(pid)), { force: true });
  }
  return killed;
}
