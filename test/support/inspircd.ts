import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { freePort } from './ports.js';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCommand, type HeraldProcess } from './process.js';
import { waitFor } from './wait.js';

const CONFIG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../irc/inspircd.conf');

/** Where Debian installs InspIRCd, or undefined when it is not installed. */
export function inspircdPath(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v inspircd || ls /usr/sbin/inspircd'], { encoding: 'utf8' });
  const p = found.stdout.trim().split('\n')[0];
  return found.status === 0 && p !== undefined && p !== '' ? p : undefined;
}

/** Why the IRC integration tests are skipped, or undefined when they run. */
export function ircSkipReason(): string | undefined {
  return inspircdPath() === undefined ? 'InspIRCd is not installed (apt-get install -y inspircd; .ci/run does it): IRC integration tests SKIPPED' : undefined;
}


function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A throwaway InspIRCd on a free loopback port, in its own process group. */
export interface Ircd {
  readonly port: number;
  readonly url: string;
  /** Kill it (SIGKILL to its group) and wait until it is gone. */
  stop(): Promise<void>;
  /** Start it again on the same port (a restart wipes channels and history, as on a real server). */
  start(): Promise<void>;
  /** Remove its folder; stops it first. */
  dispose(): Promise<void>;
  output(): string;
}

/** `without`: modules left out of the config (e.g. `ircv3_labeledresponse`, for a server that confirms nothing). */
export async function startIrcd(options: { without?: string[] } = {}): Promise<Ircd> {
  const binary = inspircdPath();
  if (binary === undefined) throw new Error('inspircd is not installed');
  const dir = mkdtempSync(path.join(tmpdir(), 'herald-ircd-'));
  const port = await freePort();
  const conf = path.join(dir, 'inspircd.conf');
  let text = readFileSync(CONFIG, 'utf8').replaceAll('@PORT@', String(port));
  for (const m of options.without ?? []) text = text.replace(`<module name="${m}">`, '');
  writeFileSync(conf, text);
  let proc: HeraldProcess | undefined;
  const args = ['--config', conf, '--nofork', '--nopid', '--nolog', ...(process.getuid?.() === 0 ? ['--runasroot'] : [])];
  const ircd: Ircd = {
    port,
    url: `irc://127.0.0.1:${port}`,
    output: () => proc?.output() ?? '',
    async start() {
      // A busy port does not stop InspIRCd (it runs with no listener): make sure it is ours.
      if (await accepts(port)) throw new Error(`port ${port} is taken by another process`);
      const p = runCommand(binary, args, {});
      proc = p;
      await waitFor(async () => (p.child.exitCode !== null ? Promise.reject(new Error(`inspircd exited: ${p.output()}`)) : accepts(port)), 'inspircd to listen', 10_000);
    },
    async stop() {
      const p = proc;
      if (p === undefined) return;
      proc = undefined;
      p.kill('SIGKILL');
      await p.closed;
    },
    async dispose() {
      await ircd.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await ircd.start();
  } catch (err) {
    await ircd.dispose();
    throw err;
  }
  return ircd;
}
