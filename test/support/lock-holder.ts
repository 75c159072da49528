import { runCommand, type HeraldProcess } from './process.js';
import { waitFor } from './wait.js';

/** Node code that takes `LOCK_DIR`'s embedded-store lock and holds it until killed, printing `locked <pid>`. */
const HOLDER =
  "import('./src/infra/db/data-dir-lock.ts').then((m) => m.lockDataDir(process.env.LOCK_DIR))" +
  ".then(() => { console.log('locked ' + process.pid); setInterval(() => undefined, 60_000); }, (err) => { console.error(String(err)); process.exit(1); })";

export interface LockHolder {
  proc: HeraldProcess;
  /** The pid of the process holding the lock. */
  pid: number;
}

/**
 * A real process holding `dataDir`'s embedded-store lock (src/infra/db/data-dir-lock.ts) until
 * it is killed, as a running Herald would: resolves once it holds it. With `unreaped`, the holder
 * is the child of a `sleep` that never waits for it, so once killed it stays a zombie (its pid
 * still answers `kill(pid, 0)`) until the test's process group is killed.
 */
export async function holdDataDir(dataDir: string, options: { unreaped?: boolean } = {}): Promise<LockHolder> {
  const node = [process.execPath, '--import', 'tsx', '-e', HOLDER];
  const proc =
    options.unreaped === true
      ? runCommand('sh', ['-c', `"$0" "$@" & exec sleep 600`, ...node], { LOCK_DIR: dataDir })
      : runCommand(node[0] ?? '', node.slice(1), { LOCK_DIR: dataDir });
  let exited = false;
  void proc.exited.then(() => (exited = true));
  const pid = await waitFor(() => {
    if (exited) throw new Error(`the lock holder exited: ${proc.output()}`);
    const match = /locked (\d+)/.exec(proc.output());
    return match === null ? undefined : Number(match[1]);
  }, 'the child to hold the lock');
  return { proc, pid };
}
