import { randomBytes } from 'node:crypto';
import type { Client, IrcLine } from 'irc-framework';
import { TransportError } from '../platform.js';

/** Numerics that refuse a JOIN: no such channel, too many channels, full, invite only, banned, bad key, bad name. */
const JOIN_REFUSALS = new Set(['403', '405', '471', '473', '474', '475', '476', '479']);

interface PendingJoin {
  resolve: () => void;
  reject: (e: Error) => void;
  /** The server sent our own JOIN back: we are in. */
  joined: boolean;
  /** The PING token whose PONG ends the server's answer to this JOIN. */
  token: string;
  /** Settles with this JOIN: what a second join() of the channel meanwhile waits on. */
  settled: Promise<void>;
}

/**
 * The commands whose answer is several lines, gathered from the lines the connection reads: JOIN
 * (with the names and the history it replays), NAMES and LIST. Channel keys are lowercased.
 */
export class IrcQueries {
  private readonly pendingJoins = new Map<string, PendingJoin>();
  private readonly namesBuffers = new Map<string, string[]>();
  private readonly namesWaiters = new Map<string, ((nicks: string[]) => void)[]>();
  private listBuffer: string[] = [];
  private listWaiters: ((channels: string[]) => void)[] = [];

  /** `nick`: the nick the connection asked for, to name in a refusal. */
  constructor(
    private readonly client: Client,
    private readonly nick: string,
  ) {}

  /**
   * Join, and resolve once the server finished answering (names, and the history it replays):
   * the lines it replayed have been read by then.
   */
  join(channel: string, timeoutMs: number): Promise<void> {
    const key = channel.toLowerCase();
    // A JOIN of this channel is under way: wait for it. A second JOIN would replace its entry, and
    // the server ignores a JOIN of a channel it has just let us into, so the second would be
    // answered by its PONG alone and read as a refusal (and the first never settled).
    const underWay = this.pendingJoins.get(key);
    if (underWay !== undefined) return underWay.settled;
    let settle!: { resolve: () => void; reject: (e: Error) => void };
    const settled = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
    const timer = setTimeout(() => {
      this.pendingJoins.delete(key);
      settle.reject(new TransportError({ kind: 'transient', detail: `no answer to JOIN ${channel}` }));
    }, timeoutMs);
    const token = `herald-join-${randomBytes(6).toString('hex')}`;
    this.pendingJoins.set(key, {
      joined: false,
      token,
      settled,
      resolve: () => (clearTimeout(timer), settle.resolve()),
      reject: (e) => (clearTimeout(timer), settle.reject(e)),
    });
    // Never labeled: a labeled JOIN wraps the history batch, and the replayed lines are lost.
    this.client.raw('JOIN', channel);
    // The server answers commands in order: its PONG comes after everything the JOIN caused
    // (names, and the history replay, which InspIRCd sends after the names).
    this.client.raw('PING', token);
    return settled;
  }

  /** Whether a JOIN of `channel` is waiting for the server's answer. */
  joining(channel: string): boolean {
    return this.pendingJoins.has(channel.toLowerCase());
  }

  /** The nicks in a channel (NAMES), without mode prefixes. */
  names(channel: string, timeoutMs: number): Promise<string[]> {
    const key = channel.toLowerCase();
    return withTimeout(
      new Promise<string[]>((resolve) => {
        const list = this.namesWaiters.get(key) ?? [];
        list.push(resolve);
        this.namesWaiters.set(key, list);
        if (list.length === 1) this.client.raw('NAMES', channel);
      }),
      timeoutMs,
      `NAMES ${channel}`,
    );
  }

  /** The server's visible channels (LIST). */
  list(timeoutMs: number): Promise<string[]> {
    return withTimeout(
      new Promise<string[]>((resolve) => {
        this.listWaiters.push(resolve);
        if (this.listWaiters.length === 1) {
          this.listBuffer = [];
          this.client.raw('LIST');
        }
      }),
      timeoutMs,
      'LIST',
    );
  }

  /** The link dropped: the JOINs under way get no answer now. */
  dropJoins(): void {
    for (const [key, j] of this.pendingJoins) {
      this.pendingJoins.delete(key);
      j.reject(new TransportError({ kind: 'transient', detail: 'the IRC link dropped during JOIN' }));
    }
  }

  /** Gather a line that is part of an answer, and settle the queries it completes. */
  read(command: string, line: IrcLine): void {
    switch (command) {
      case 'JOIN': {
        const channel = line.params[0]?.toLowerCase();
        const pending = channel === undefined ? undefined : this.pendingJoins.get(channel);
        if (pending !== undefined && line.nick.toLowerCase() === this.client.user.nick.toLowerCase()) pending.joined = true;
        return;
      }
      case 'PONG': {
        const token = line.params.at(-1);
        for (const [channel, pending] of this.pendingJoins) {
          if (pending.token !== token) continue;
          this.pendingJoins.delete(channel);
          if (pending.joined) pending.resolve();
          else pending.reject(new TransportError({ kind: 'rejected', detail: `the IRC server did not let ${this.nick} join ${channel}` }));
        }
        return;
      }
      case '366': {
        // End of NAMES, for a NAMES query (or a JOIN, which the PONG after it settles).
        const channel = line.params[1]?.toLowerCase();
        if (channel === undefined) return;
        const nicks = this.namesBuffers.get(channel) ?? [];
        this.namesBuffers.delete(channel);
        const waiters = this.namesWaiters.get(channel) ?? [];
        this.namesWaiters.delete(channel);
        for (const w of waiters) w(nicks);
        return;
      }
      case '353': {
        const channel = line.params[2]?.toLowerCase();
        if (channel === undefined) return;
        const nicks = (line.params[3] ?? '')
          .split(' ')
          .filter((n) => n !== '')
          // multi-prefix and userhost-in-names: strip modes and the user@host part.
          .map((n) => n.replace(/^[~&@%+]+/, '').split('!')[0] ?? n);
        this.namesBuffers.set(channel, [...(this.namesBuffers.get(channel) ?? []), ...nicks]);
        return;
      }
      case '322': {
        if (line.params[1] !== undefined) this.listBuffer.push(line.params[1]);
        return;
      }
      case '323': {
        const waiters = this.listWaiters;
        this.listWaiters = [];
        for (const w of waiters) w([...this.listBuffer]);
        return;
      }
      default: {
        if (JOIN_REFUSALS.has(command)) {
          const channel = line.params[1]?.toLowerCase();
          const pending = channel === undefined ? undefined : this.pendingJoins.get(channel);
          if (pending !== undefined && channel !== undefined) {
            this.pendingJoins.delete(channel);
            pending.reject(new TransportError({ kind: 'rejected', detail: `the IRC server refused to join ${channel} (${command})` }));
          }
        }
      }
    }
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new TransportError({ kind: 'transient', detail: `no answer to ${what}` })), ms);
    }),
  ]);
}
