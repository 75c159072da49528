import { randomBytes } from 'node:crypto';
import { Client, Message, type IrcLine } from 'irc-framework';
import type { Logger } from 'pino';
import { TransportError } from '../transport.js';

/** Where the IRC server is, from `HERALD_IRC_URL` (`irc://host:port` or `ircs://host:port`). */
export interface IrcServer {
  host: string;
  port: number;
  /** ircs://: TLS, certificate verified against the host name. */
  tls: boolean;
}

/** `irc://host[:6667]` or `ircs://host[:6697]`; anything else is undefined. */
export function parseIrcUrl(url: string): IrcServer | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  if ((u.protocol !== 'irc:' && u.protocol !== 'ircs:') || u.hostname === '' || u.pathname.replace(/^\/+/, '') !== '') return undefined;
  const tls = u.protocol === 'ircs:';
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: u.port === '' ? (tls ? 6697 : 6667) : Number(u.port), tls };
}

/** What the server confirmed it does for this connection (IRCv3 caps). */
export interface IrcCaps {
  /** labeled-response and echo-message: each line we send comes back labeled, with its msgid. */
  confirmsLines: boolean;
  messageTags: boolean;
  serverTime: boolean;
}

/** A PRIVMSG in a channel, as the connection read it (live, echoed, or replayed on JOIN). */
export interface ChannelLine {
  channel: string;
  nick: string;
  text: string;
  /** server-time when the server sent one, else when it arrived. */
  time: Date;
  msgid: string | undefined;
  /** The client tag `+herald/delivery`, when a Herald sender wrote it. */
  deliveryTag: string | undefined;
}

export interface IrcConnectionOptions {
  server: IrcServer;
  nick: string;
  /** SASL PLAIN password for the account named like the nick. */
  saslPassword?: string | undefined;
  log: Logger;
  /** Lines this connection may send per second (its flood limit); a burst of a few goes at once. */
  linesPerSecond: number;
  /** How long a labeled line waits for its echo before it counts as unanswered. */
  echoTimeoutMs: number;
  onLine?: (line: ChannelLine) => void;
  /** Keep trying when the first connection fails (the observer); otherwise `connect()` rejects. */
  keepTrying?: boolean;
  /** Registered again after the link dropped (channels are rejoined by the connection). */
  onReconnect?: () => void;
}

/** The client tag carrying the delivery a line belongs to (tag keys are lowercased by parsers). */
export const DELIVERY_TAG = '+herald/delivery';
/** How many lines may go out back to back before the flood limit spaces them. */
const BURST = 5;
const RECONNECT_BASE_MS = 250;
/** How many `_`-suffixed nicks the observer tries when its own is taken. */
const MAX_ALT_NICKS = 3;
const RECONNECT_CAP_MS = 30_000;
/** Numerics that refuse a JOIN: no such channel, too many channels, full, invite only, banned, bad key, bad name. */
const JOIN_REFUSALS = new Set(['403', '405', '471', '473', '474', '475', '476', '479']);
/** Numerics that refuse a PRIVMSG: no such nick/channel, cannot send to channel, no recipient, no text. */
const SEND_REFUSALS = new Set(['401', '403', '404', '411', '412']);

interface Waiter {
  resolve: (line: IrcLine | undefined) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * One registered IRC connection on irc-framework, as a small typed facade: register (with the
 * IRCv3 caps Herald relies on where the server has them), join and rejoin, send a line and learn
 * from its labeled echo that the server took it, NAMES and LIST, and reconnect with backoff
 * (the library's own reconnect gives up after 3 tries and never rejoins).
 *
 * Every line is read in the raw middleware: the library buffers whole batches and drops lines
 * of batches it does not know, which would lose labels and replayed history.
 */
export class IrcConnection {
  readonly client: Client;
  private readonly joined = new Set<string>();
  private readonly labels = new Map<string, Waiter>();
  private readonly pendingJoins = new Map<string, { resolve: () => void; reject: (e: Error) => void; joined: boolean; token: string }>();
  private readonly namesBuffers = new Map<string, string[]>();
  private readonly namesWaiters = new Map<string, ((nicks: string[]) => void)[]>();
  private listBuffer: string[] = [];
  private listWaiters: ((channels: string[]) => void)[] = [];
  private registeredOnce = false;
  private isRegistered = false;
  private closing = false;
  private reconnects = 0;
  private altNicks = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private nextFreeAt = 0;
  private registration: { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void };

  constructor(private readonly options: IrcConnectionOptions) {
    this.registration = deferred();
    // Registration errors before the first success surface on `registered()`; later ones only in logs.
    this.registration.promise.catch(() => undefined);
    this.client = new Client();
    this.client.requestCap(['labeled-response', 'echo-message', 'message-tags', 'server-time', 'batch']);
    this.client.use((_client, raw) => raw.use((command, line, _raw, _c, next) => {
      try {
        this.onRaw(command, line);
      } finally {
        next();
      }
    }));
    this.client.on('registered', () => {
      this.isRegistered = true;
      this.reconnects = 0;
      const again = this.registeredOnce;
      this.registeredOnce = true;
      this.registration.resolve();
      if (again) {
        for (const channel of this.joined) this.client.raw('JOIN', channel);
        this.options.onReconnect?.();
      }
    });
    this.client.on('nick in use', () => {
      if (this.isRegistered) return;
      if (this.options.keepTrying === true && this.altNicks < MAX_ALT_NICKS) {
        // The observer (keepTrying) must get on the network: the nick may be held by a replica, or
        // by the ghost of a process that died before the server noticed. Herald's sends never
        // depend on the observer's exact nick.
        this.altNicks += 1;
        this.client.changeNick(`${this.options.nick.slice(0, 29 - this.altNicks)}${'_'.repeat(this.altNicks)}`);
        return;
      }
      this.fail(new TransportError({ kind: 'rejected', detail: `the nick ${this.options.nick} is in use on the IRC server` }));
    });
    this.client.on('nick invalid', () => {
      if (!this.isRegistered) this.fail(new TransportError({ kind: 'rejected', detail: `the IRC server refuses the nick ${this.options.nick}` }));
    });
    this.client.on('sasl failed', () => this.fail(new TransportError({ kind: 'rejected', detail: 'SASL authentication failed' })));
    this.client.on('close', () => this.onClose());
  }

  /** Connect and resolve once registered (or reject: nick taken, refused, unreachable). */
  connect(): Promise<void> {
    this.closing = false;
    this.open();
    return this.registration.promise;
  }

  registered(): Promise<void> {
    return this.registration.promise;
  }

  get isUp(): boolean {
    return this.isRegistered;
  }

  get nick(): string {
    return this.client.user.nick;
  }

  get caps(): IrcCaps {
    const cap = this.client.network.cap;
    return {
      confirmsLines: cap.isEnabled('labeled-response') && cap.isEnabled('echo-message'),
      messageTags: cap.isEnabled('message-tags'),
      serverTime: cap.isEnabled('server-time'),
    };
  }

  /** The server's line length in bytes (ISUPPORT LINELEN), 512 when it does not say. */
  get lineLength(): number {
    const v = this.client.network.supports('LINELEN');
    const n = typeof v === 'string' ? Number(v) : NaN;
    return Number.isInteger(n) && n >= 512 ? n : 512;
  }

  get channels(): readonly string[] {
    return [...this.joined];
  }

  /**
   * Join, and resolve once the server finished answering (names, and the history it replays):
   * the lines it replayed have been handed to `onLine` by then.
   */
  async join(channel: string, timeoutMs = 10_000): Promise<void> {
    await this.registered();
    const key = channel.toLowerCase();
    if (this.joined.has(key)) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pendingJoins.delete(key);
        reject(new TransportError({ kind: 'transient', detail: `no answer to JOIN ${channel}` }));
      }, timeoutMs);
      const token = `herald-join-${randomBytes(6).toString('hex')}`;
      this.pendingJoins.set(key, {
        joined: false,
        token,
        resolve: () => (clearTimeout(timer), resolve()),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      // Never labeled: a labeled JOIN wraps the history batch, and the replayed lines are lost.
      this.client.raw('JOIN', channel);
      // The server answers commands in order: its PONG comes after everything the JOIN caused
      // (names, and the history replay, which InspIRCd sends after the names).
      this.client.raw('PING', token);
    });
    this.joined.add(key);
  }

  /**
   * Send one PRIVMSG (its text must already fit the line). With labeled-response and
   * echo-message the server's labeled echo proves it took the line and gives its msgid; without
   * them the answer is `confirmed: false` once the line is written.
   */
  async send(target: string, text: string, tags: Record<string, string>, signal: AbortSignal): Promise<{ confirmed: boolean; msgid: string | undefined; time: Date | undefined }> {
    await this.registered();
    await this.pace(signal);
    if (!this.isRegistered) throw new TransportError({ kind: 'transient', detail: 'the IRC link is down' });
    const caps = this.caps;
    const message = new Message('PRIVMSG', target, text);
    const outTags: Record<string, string> = caps.messageTags ? { ...tags } : {};
    if (!caps.confirmsLines) {
      message.tags = outTags;
      this.client.raw(message);
      return { confirmed: false, msgid: undefined, time: undefined };
    }
    const label = randomBytes(6).toString('base64url');
    message.tags = { ...outTags, label };
    const echo = await new Promise<IrcLine | undefined>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.labels.delete(label);
        // The line went out and no echo came: it may have been taken.
        reject(new TransportError({ kind: 'transient', detail: 'no labeled echo from the IRC server in time', mayHaveCreated: true }));
      }, this.options.echoTimeoutMs);
      const onAbort = (): void => {
        clearTimeout(timer);
        this.labels.delete(label);
        reject(new TransportError({ kind: 'transient', detail: 'aborted while waiting for the echo', mayHaveCreated: true }));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.labels.set(label, {
        resolve: (l) => (signal.removeEventListener('abort', onAbort), resolve(l)),
        reject: (e) => (signal.removeEventListener('abort', onAbort), reject(e)),
        timer,
      });
      this.client.raw(message);
    });
    const time = typeof echo?.tags['time'] === 'string' ? new Date(echo.tags['time']) : undefined;
    return { confirmed: echo !== undefined, msgid: typeof echo?.tags['msgid'] === 'string' ? echo.tags['msgid'] : undefined, time };
  }

  /** The nicks in a channel (NAMES), without mode prefixes. */
  async names(channel: string, timeoutMs = 10_000): Promise<string[]> {
    await this.registered();
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
  async list(timeoutMs = 10_000): Promise<string[]> {
    await this.registered();
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

  /** Quit and stop reconnecting. */
  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.reconnectTimer);
    const wasUp = this.client.connected;
    this.fail(new TransportError({ kind: 'transient', detail: 'the IRC connection was closed' }));
    if (!wasUp) {
      this.client.connection.end();
      return;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.client.connection.end();
        resolve();
      }, 1_000);
      this.client.once('close', () => (clearTimeout(timer), resolve()));
      this.client.quit('Herald closing');
    });
  }

  private open(): void {
    const { server, nick, saslPassword } = this.options;
    this.altNicks = 0;
    this.client.connect({
      host: server.host,
      port: server.port,
      tls: server.tls,
      rejectUnauthorized: true,
      nick,
      username: nick.slice(0, 10).replace(/[^A-Za-z0-9]/g, '') || 'herald',
      gecos: 'Herald',
      version: null,
      enable_echomessage: true,
      // Herald reconnects and rejoins itself.
      auto_reconnect: false,
      // Herald splits lines itself, to the server's length; the library must not split again.
      message_max_length: 100_000,
      ...(saslPassword !== undefined ? { account: { account: nick, password: saslPassword }, sasl_mechanism: 'PLAIN' } : {}),
    });
  }

  private onClose(): void {
    const wasRegistered = this.isRegistered;
    this.isRegistered = false;
    for (const [label, w] of this.labels) {
      clearTimeout(w.timer);
      this.labels.delete(label);
      w.reject(new TransportError({ kind: 'transient', detail: 'the IRC link dropped before the echo', mayHaveCreated: true }));
    }
    for (const [key, j] of this.pendingJoins) {
      this.pendingJoins.delete(key);
      j.reject(new TransportError({ kind: 'transient', detail: 'the IRC link dropped during JOIN' }));
    }
    if (this.closing) return;
    if (!this.registeredOnce && this.options.keepTrying !== true) {
      this.fail(new TransportError({ kind: 'transient', detail: `cannot reach the IRC server ${this.options.server.host}:${this.options.server.port}` }));
      return;
    }
    if (wasRegistered) {
      this.options.log.warn({ nick: this.options.nick }, 'IRC link dropped; reconnecting');
      this.registration = deferred();
      this.registration.promise.catch(() => undefined);
    }
    const delay = Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** this.reconnects) * (0.5 + Math.random() / 2);
    this.reconnects += 1;
    this.reconnectTimer = setTimeout(() => this.open(), delay);
  }

  private fail(err: Error): void {
    this.registration.reject(err);
    if (!this.registeredOnce && !this.closing) {
      this.closing = true;
      this.client.connection.end();
    }
  }

  private async pace(signal: AbortSignal): Promise<void> {
    const interval = 1000 / this.options.linesPerSecond;
    const now = Date.now();
    this.nextFreeAt = Math.max(this.nextFreeAt, now - BURST * interval) + interval;
    const wait = this.nextFreeAt - now - BURST * interval;
    if (wait > 0) await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, wait);
      signal.addEventListener('abort', () => (clearTimeout(t), reject(new TransportError({ kind: 'transient', detail: 'aborted' }))), { once: true });
    });
  }

  private onRaw(command: string, line: IrcLine): void {
    const label = typeof line.tags['label'] === 'string' ? line.tags['label'] : undefined;
    const waiter = label === undefined ? undefined : this.labels.get(label);
    if (waiter !== undefined && label !== undefined) {
      if (command === 'PRIVMSG' || command === 'ACK' || command === 'BATCH') {
        this.labels.delete(label);
        clearTimeout(waiter.timer);
        waiter.resolve(command === 'PRIVMSG' ? line : undefined);
      } else if (SEND_REFUSALS.has(command) || command === 'FAIL') {
        this.labels.delete(label);
        clearTimeout(waiter.timer);
        waiter.reject(new TransportError({ kind: 'rejected', detail: `the IRC server refused the line (${command} ${line.params.at(-1) ?? ''})` }));
      }
    }
    const me = this.client.user.nick.toLowerCase();
    switch (command) {
      case 'PRIVMSG': {
        const [target, text] = line.params;
        if (target === undefined || text === undefined || !/^[#&]/.test(target)) return;
        const time = typeof line.tags['time'] === 'string' ? new Date(line.tags['time']) : new Date();
        const tag = line.tags[DELIVERY_TAG];
        this.options.onLine?.({
          channel: target.toLowerCase(),
          nick: line.nick,
          text,
          time: Number.isNaN(time.getTime()) ? new Date() : time,
          msgid: typeof line.tags['msgid'] === 'string' ? line.tags['msgid'] : undefined,
          deliveryTag: typeof tag === 'string' ? tag : undefined,
        });
        return;
      }
      case 'JOIN': {
        const channel = line.params[0]?.toLowerCase();
        const pending = channel === undefined ? undefined : this.pendingJoins.get(channel);
        if (pending !== undefined && line.nick.toLowerCase() === me) pending.joined = true;
        return;
      }
      case 'PONG': {
        const token = line.params.at(-1);
        for (const [channel, pending] of this.pendingJoins) {
          if (pending.token !== token) continue;
          this.pendingJoins.delete(channel);
          if (pending.joined) pending.resolve();
          else pending.reject(new TransportError({ kind: 'rejected', detail: `the IRC server did not let ${this.options.nick} join ${channel}` }));
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
      case 'KICK': {
        if (line.params[1]?.toLowerCase() === me && line.params[0] !== undefined) {
          // Kicked: join again (the channel stays in the set, so a reconnect rejoins too).
          this.client.raw('JOIN', line.params[0]);
        }
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

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
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
