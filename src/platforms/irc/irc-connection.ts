import { Client, Message, type IrcLine } from 'irc-framework';
import type { Logger } from 'pino';
import { TransportError } from '../platform.js';
import { channelLineOf, type ChannelLine } from './channel-line.js';
import { LabeledLines } from './labeled-lines.js';
import { IrcQueries } from './irc-queries.js';
import type { IrcServer } from './irc-server.js';
import { beforeLeaving } from '../../infra/faults/fence.js';

// What the transport, the wiring and the tests import from here; each lives in the file named.
export { DELIVERY_TAG, type ChannelLine } from './channel-line.js';
export { parseIrcUrl, type IrcServer } from './irc-server.js';

/** What the server confirmed it does for this connection (IRCv3 caps). */
export interface IrcCaps {
  /** labeled-response and echo-message: each line we send comes back labeled, with its msgid. */
  confirmsLines: boolean;
  messageTags: boolean;
  serverTime: boolean;
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

/** How many lines may go out back to back before the flood limit spaces them. */
const BURST = 5;
const RECONNECT_BASE_MS = 250;
/** How many `_`-suffixed nicks the observer tries when its own is taken. */
const MAX_ALT_NICKS = 3;
const RECONNECT_CAP_MS = 30_000;

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
  /**
   * Per channel this connection is in now: since when (ms since the epoch) it has read every line
   * said there without a break. Set when the server echoes our JOIN (every later line comes to us),
   * moved back to the oldest line the server replays on that JOIN (its history is the channel's
   * latest lines, with none left out after the oldest it sends); dropped with the link, a KICK or a PART.
   */
  private readonly readSince = new Map<string, number>();
  private readonly labeled: LabeledLines;
  private readonly queries: IrcQueries;
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
    this.labeled = new LabeledLines(options.echoTimeoutMs);
    this.queries = new IrcQueries(this.client, options.nick);
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
   * Since when this connection has read every line of `channel` without a break (server-time of
   * the oldest line replayed on joining, or when the join took effect); undefined when it is not
   * in the channel now. Lines before it may have been missed.
   */
  readingSince(channel: string): Date | undefined {
    const since = this.readSince.get(channel.toLowerCase());
    return since === undefined ? undefined : new Date(since);
  }

  /**
   * Join, and resolve once the server finished answering (names, and the history it replays):
   * the lines it replayed have been handed to `onLine` by then.
   */
  async join(channel: string, timeoutMs = 10_000): Promise<void> {
    await this.registered();
    const key = channel.toLowerCase();
    // Under way: wait for the server to finish answering it (the replayed lines are read then).
    if (this.joined.has(key) && !this.queries.joining(key)) return;
    await this.queries.join(channel, timeoutMs);
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
    // The line is written only while the job's lease holds (src/infra/faults/fence.ts).
    beforeLeaving();
    const caps = this.caps;
    const message = new Message('PRIVMSG', target, text);
    const outTags: Record<string, string> = caps.messageTags ? { ...tags } : {};
    if (!caps.confirmsLines) {
      message.tags = outTags;
      this.client.raw(message);
      return { confirmed: false, msgid: undefined, time: undefined };
    }
    const echo = await this.labeled.confirm((label) => {
      message.tags = { ...outTags, label };
      this.client.raw(message);
    }, signal);
    const time = typeof echo?.tags['time'] === 'string' ? new Date(echo.tags['time']) : undefined;
    return { confirmed: echo !== undefined, msgid: typeof echo?.tags['msgid'] === 'string' ? echo.tags['msgid'] : undefined, time };
  }

  /** The nicks in a channel (NAMES), without mode prefixes. */
  async names(channel: string, timeoutMs = 10_000): Promise<string[]> {
    await this.registered();
    return this.queries.names(channel, timeoutMs);
  }

  /** The server's visible channels (LIST). */
  async list(timeoutMs = 10_000): Promise<string[]> {
    await this.registered();
    return this.queries.list(timeoutMs);
  }

  /** Quit and stop reconnecting. */
  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.reconnectTimer);
    // Not registered (still connecting, or a server that does not answer): nothing to QUIT, drop it now.
    const wasUp = this.client.connected && this.isRegistered;
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
    // Lines said while the link is down never reach us: the record breaks here.
    this.readSince.clear();
    this.labeled.dropAll();
    this.queries.dropJoins();
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

  /**
   * Wait for this line's turn: BURST lines at once after a quiet spell, then one per interval.
   * `nextFreeAt` is when the flood limit would have let the lines so far out one by one; a line
   * may go up to BURST intervals ahead of it (before, the spell was also counted from BURST
   * intervals back, which let twice BURST lines out at once).
   */
  private async pace(signal: AbortSignal): Promise<void> {
    const interval = 1000 / this.options.linesPerSecond;
    const now = Date.now();
    this.nextFreeAt = Math.max(this.nextFreeAt, now) + interval;
    const wait = this.nextFreeAt - now - BURST * interval;
    if (wait > 0) await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, wait);
      signal.addEventListener('abort', () => (clearTimeout(t), reject(new TransportError({ kind: 'transient', detail: 'aborted' }))), { once: true });
    });
  }

  /** Every line the connection reads, before the library buffers or drops any. */
  private onRaw(command: string, line: IrcLine): void {
    this.labeled.read(command, line);
    this.queries.read(command, line);
    const self = this.client.user.nick.toLowerCase();
    if (command === 'PRIVMSG') {
      const channelLine = channelLineOf(line);
      if (channelLine !== undefined) {
        // A line older than the join is one the server replayed: everything after it was replayed or is live.
        const since = this.readSince.get(channelLine.channel);
        if (since !== undefined && channelLine.time.getTime() < since) this.readSince.set(channelLine.channel, channelLine.time.getTime());
        this.options.onLine?.(channelLine);
      }
    } else if (command === 'JOIN' && line.nick.toLowerCase() === self && line.params[0] !== undefined) {
      const channel = line.params[0].toLowerCase();
      if (!this.readSince.has(channel)) this.readSince.set(channel, Date.now());
      // The server let us in, even where the JOIN's answer came after join() gave up waiting: a
      // later JOIN of the channel would be ignored by the server, so join() must not send one.
      this.joined.add(channel);
    } else if (command === 'PART' && line.nick.toLowerCase() === self && line.params[0] !== undefined) {
      this.readSince.delete(line.params[0].toLowerCase());
    } else if (command === 'KICK' && line.params[1]?.toLowerCase() === self && line.params[0] !== undefined) {
      this.readSince.delete(line.params[0].toLowerCase());
      // Kicked: join again (the channel stays in the set, so a reconnect rejoins too).
      this.client.raw('JOIN', line.params[0]);
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
