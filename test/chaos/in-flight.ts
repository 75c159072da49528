import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { sleep } from './campaign.js';
import type { PausePlan } from './pauses.js';

/**
 * Pauses with a send in flight, for any platform: each Herald process reaches the platform through a
 * proxy of its own (test/support/tcp-proxy.ts, forwarding only) that sees its sends leave (a chunk
 * matching `send`). Armed, the next process seen sending is stopped at once: its request is out,
 * and the answer waits in its socket while it is stopped (or the platform holds it too, when the
 * phase asked its sandbox to when it armed).
 */
export class InFlightTap {
  private armed = false;
  private readonly proxies: TcpProxy[] = [];
  readonly counts = { armed: 0, caught: 0, spared: 0 };

  constructor(
    private readonly plan: PausePlan,
    private readonly send: RegExp,
  ) {}

  /** A proxy for `member`'s process to the platform at `upstreamPort`; answers its port. */
  async proxy(member: string, upstreamPort: number, upstreamHost = '127.0.0.1'): Promise<number> {
    const proxy = await startTcpProxy({ upstreamHost, upstreamPort, onClientData: (chunk) => this.seen(member, chunk) });
    this.proxies.push(proxy);
    return proxy.port;
  }

  private seen(member: string, chunk: Buffer): void {
    if (!this.armed || !this.send.test(chunk.subarray(0, 400).toString('latin1'))) return;
    this.armed = false;
    if (this.plan.stop(member, 'create-in-flight')) this.counts.caught += 1;
    else this.counts.spared += 1;
  }

  /** Arm for the next send (after `hold`, which may make the platform hold it); disarmed after a few seconds without one. */
  async arm(hold?: () => void): Promise<void> {
    hold?.();
    this.counts.armed += 1;
    this.armed = true;
    const until = Date.now() + 5_000;
    while (this.armed && this.plan.isRunning && Date.now() < until) await sleep(50);
    this.armed = false;
  }

  disarm(): void {
    this.armed = false;
  }

  note(what: string): string {
    return `${what} in flight: ${this.counts.armed} armed, ${this.counts.caught} caught (the sending process stopped with its request out), ${this.counts.spared} spared (the last serve process running)`;
  }

  async close(): Promise<void> {
    this.armed = false;
    await Promise.all(this.proxies.map((p) => p.close()));
  }
}
