import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { errorSummary } from '../../infra/errors.js';
import {
  TransportError,
  type ChannelInfo,
  type Chat,
  type ChatLine,
  type ChatSent,
  type MemberInfo,
  type OutgoingMessage,
  type SeenMessage,
  type SentMessage,
  type Platform,
} from '../platform.js';
import { DELIVERY_TAG, IrcConnection, type ChannelLine, type IrcServer } from './irc-connection.js';
import { addChannel, linesBetween, linesTagged, listStoredChannels, pruneLines, readLines, storeLine } from './irc-line.repository.js';
import type { IrcDb } from './irc-line.table.js';
import type { IrcMetrics } from './irc.metrics.js';
import { ircChannel, ircLineBudget, ircTextProblem, parseTag, renderForIrc, splitForIrc } from './split.js';
import { partway } from '../partway.js';

export { IrcMetrics } from './irc.metrics.js';

export interface IrcTransportOptions {
  server: IrcServer;
  /** The observer's nick: Herald's own name on the network (protocol posts go out under it). */
  nick: string;
  saslPassword?: string | undefined;
  /** Channels the observer joins at start (besides those created through Herald). */
  channels: readonly string[];
  db: Kysely<IrcDb>;
  log: Logger;
  metrics: IrcMetrics;
  linesPerSecond: number;
  echoTimeoutMs: number;
  /** A sender's connection unused this long is closed. */
  senderIdleMs: number;
  /** Lines kept: younger than this, and at most this many per channel. */
  retention: { maxAgeMs: number; perChannel: number };
  /** A line one of Herald's sends wrote (its last part), seen by the observer: the sent-message ledger. */
  onOwnLine?: (key: string, channel: string, msgid: string, at: Date) => Promise<void>;
  /**
   * How far the IRC server's clock (the time of the lines it replays) and Herald's may differ: a
   * proof trusts the observer's record only from this long after it began. Default 5 s.
   */
  clockSkewMs?: number;
}

/** RFC 2812 nick characters; the length limit is the server's (NICKLEN, 30 when unsaid). */
const NICK = /^[A-Za-z[\]\\`_^{|}][A-Za-z0-9[\]\\`_^{|}-]*$/;
const NICK_MAX = 30;
/** A channel name: `#` or `&`, then no space, comma, colon or control character, at most 50 in all. */
const CHANNEL = /^[#&][^\s,:\p{Cc}]{1,49}$/u;
const PRUNE_EVERY_MS = 10 * 60 * 1000;
const CLOCK_SKEW_MS = 5_000;

interface SenderEntry {
  conn: IrcConnection;
  ready: Promise<void>;
  lastUsed: number;
}

/**
 * IRC as Herald's second platform. One observer connection (Herald's own nick) joins every
 * channel Herald uses and stores what it reads, so reading survives a restart and replicas share
 * it; each agent speaks under its own nick through a connection of its own, opened on first use,
 * reused, and closed when idle. Every line Herald writes carries `+herald/delivery` (the send's key
 * and part), so after a crash the channel itself tells which parts already went out.
 */
export class IrcPlatform implements Platform {
  readonly name = 'irc' as const;
  readonly title = 'IRC';
  /** IRC honours no idempotency key: a resend after doubt is decided from what the observer read. */
  readonly idempotentSend = false;
  /** The observer connection, while this process holds the IRC lease (irc:observer). */
  private held: IrcConnection | undefined;
  private readonly senders = new Map<string, SenderEntry>();
  private readonly storing = new Set<Promise<void>>();
  /** Per channel, the newest server-time of a line the observer read but could not store: the record has a hole there. */
  private readonly unstored = new Map<string, number>();
  private sweep: NodeJS.Timeout | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: IrcTransportOptions) {}

  private newObserver(): IrcConnection {
    const options = this.options;
    return new IrcConnection({
      server: options.server,
      nick: options.nick,
      saslPassword: options.saslPassword,
      log: options.log,
      linesPerSecond: options.linesPerSecond,
      echoTimeoutMs: options.echoTimeoutMs,
      keepTrying: true,
      onLine: (line) => this.store(line),
      onReconnect: () => {
        options.metrics.reconnected('observer');
        options.log.info('IRC observer registered again; channels rejoined');
      },
    });
  }

  /**
   * Every IRC connection (the observer, and agents' nicks) lives on the one replica holding the
   * lease: others have none, so a channel shows one observer and each nick is connected once. A send
   * on another replica fails at once, before anything is written, as `heldElsewhere`: the outbox
   * puts it back without spending an attempt, and the holder's dispatcher picks it up.
   */
  private get observer(): IrcConnection {
    if (this.held === undefined) throw new TransportError({ kind: 'transient', heldElsewhere: true, detail: 'the IRC connections are held by another replica' });
    return this.held;
  }

  /** `irc://host:port/%23channel?msgid=…`: IRC has no message links; this names the line. */
  messageUrl(_scope: string, channelId: string, messageId: string): string {
    const { host, port, tls } = this.options.server;
    return `${tls ? 'ircs' : 'irc'}://${host.includes(':') ? `[${host}]` : host}:${port}/${encodeURIComponent(channelId)}?msgid=${encodeURIComponent(messageId || 'unknown')}`;
  }

  /** Whether the observer's link is registered (for /readyz and the link gauge). */
  get up(): boolean {
    return this.held?.isUp === true;
  }

  /** Start the upkeep timers; the connections open once this process holds the lease (observe). */
  start(): void {
    // Also joins, now and then, channels another replica created (stored) while this one held the lease.
    this.sweep = setInterval(() => (this.closeIdle(), void this.joinStored().catch(() => undefined)), Math.min(5_000, Math.max(1_000, this.options.senderIdleMs / 2)));
    this.sweep.unref();
    this.pruneTimer = setInterval(() => void this.prune(), PRUNE_EVERY_MS);
    this.pruneTimer.unref();
  }

  /** This process holds the lease: connect the observer and join the channels (configured, and created through Herald). */
  async observeAll(): Promise<void> {
    if (this.closed || this.held !== undefined) return;
    const observer = this.newObserver();
    this.held = observer;
    observer.connect().catch(() => undefined);
    await this.joinStored().catch((err: unknown) => this.options.log.warn({ err: errorSummary(err) }, 'IRC observer not joined yet'));
  }

  /** The lease is lost (or given up): close every IRC connection at once. */
  async stopObserving(): Promise<void> {
    const observer = this.held;
    this.held = undefined;
    const senders = [...this.senders.values()];
    this.senders.clear();
    await Promise.all([observer?.close(), ...senders.map((s) => s.conn.close())]);
  }

  private async joinStored(): Promise<void> {
    const observer = this.held;
    if (observer === undefined) return;
    await observer.registered();
    const channels = new Set([...this.options.channels.map(ircChannel), ...(await listStoredChannels(this.options.db))]);
    const missing = [...channels].filter((c) => !observer.channels.includes(c));
    await Promise.all(missing.map((c) => observer.join(c).catch((err: unknown) => this.options.log.warn({ channel: c, err: errorSummary(err) }, 'IRC observer could not join a channel'))));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweep);
    clearInterval(this.pruneTimer);
    await this.stopObserving();
    await Promise.allSettled([...this.storing]);
  }

  /** Delete lines past retention. */
  async prune(now = new Date()): Promise<number> {
    try {
      return await pruneLines(this.options.db, new Date(now.getTime() - this.options.retention.maxAgeMs), this.options.retention.perChannel);
    } catch (err) {
      this.options.metrics.pruneFailed();
      this.options.log.error({ err: errorSummary(err) }, 'could not prune IRC lines');
      return 0;
    }
  }

  private store(line: ChannelLine): void {
    const p = (async () => {
      try {
        await storeLine(this.options.db, line);
      } catch (err) {
        this.unstored.set(line.channel, Math.max(this.unstored.get(line.channel) ?? 0, line.time.getTime()));
        throw err;
      }
      const tag = line.deliveryTag === undefined ? undefined : parseTag(line.deliveryTag);
      // Any member with message-tags can write the tag: only a line under a nick Herald connects as is Herald's.
      if (tag !== undefined && tag.index === tag.count - 1 && line.msgid !== undefined && this.options.onOwnLine !== undefined && this.ownNick(line.nick)) {
        await this.options.onOwnLine(tag.key, line.channel, line.msgid, line.time);
      }
    })().catch((err: unknown) => this.options.log.warn({ err: errorSummary(err) }, 'could not store an IRC line'));
    this.storing.add(p);
    void p.finally(() => this.storing.delete(p));
  }

  /** Whether `nick` is one Herald connects as now: the observer's (as the server has it), or an agent's sender. */
  private ownNick(nick: string): boolean {
    const n = nick.toLowerCase();
    return n === (this.held?.nick || this.options.nick).toLowerCase() || this.senders.has(n);
  }

  /** Lines read so far are in the store. */
  private async stored(): Promise<void> {
    await Promise.allSettled([...this.storing]);
  }

  /** The observer is in the channel (and what the server replayed on joining is stored). */
  private async observe(channel: string): Promise<void> {
    await this.observer.join(channel);
    await this.stored();
  }

  /**
   * A proof may say a line is not in `channel` only if the observer's record holds every line said
   * there since `since`: this observer has been in the channel without a break from before then
   * (counting what the server replayed on joining), and stored all it read. Otherwise (the
   * observer was reconnecting, another replica held the lease, a line was not stored) it cannot
   * tell yet: a transient failure, so the in-doubt rule retries and in the end reports it unknown.
   */
  private recordHolds(channel: string, since: Date): void {
    const from = this.held?.readingSince(channel)?.getTime();
    const start = since.getTime() - (this.options.clockSkewMs ?? CLOCK_SKEW_MS);
    if (from !== undefined && from < start && (this.unstored.get(channel) ?? -Infinity) < start) return;
    throw new TransportError({ kind: 'transient', detail: `the IRC observer has not read ${channel} without a break since then: whether a line went out there cannot be told yet` });
  }

  private async senderConnection(nick: string): Promise<IrcConnection> {
    void this.observer; // only the lease holder connects agents' nicks
    const key = nick.toLowerCase();
    let entry = this.senders.get(key);
    if (entry === undefined) {
      if (this.closed) throw new TransportError({ kind: 'transient', detail: 'the IRC transport is closing' });
      const conn = new IrcConnection({
        server: this.options.server,
        nick,
        log: this.options.log,
        linesPerSecond: this.options.linesPerSecond,
        echoTimeoutMs: this.options.echoTimeoutMs,
        onReconnect: () => this.options.metrics.reconnected('sender'),
      });
      const created: SenderEntry = { conn, ready: conn.connect(), lastUsed: Date.now() };
      entry = created;
      this.senders.set(key, created);
      created.ready.catch(() => {
        if (this.senders.get(key) === created) this.senders.delete(key);
        void conn.close();
      });
    }
    entry.lastUsed = Date.now();
    await entry.ready;
    await entry.conn.registered();
    return entry.conn;
  }

  private closeIdle(): void {
    const cutoff = Date.now() - this.options.senderIdleMs;
    for (const [key, entry] of this.senders) {
      if (entry.lastUsed < cutoff) {
        this.senders.delete(key);
        void entry.conn.close();
      }
    }
  }

  private lineBudget(conn: IrcConnection, channel: string): number {
    return ircLineBudget(conn.lineLength, conn.nick, channel);
  }

  /** Send text's parts (those not yet out) on one connection, each tagged with the key and its index. */
  private async sendParts(conn: IrcConnection, link: 'observer' | 'sender', channel: string, text: string, key: string, alreadySent: ReadonlyMap<number, string>, signal: AbortSignal): Promise<ChatSent> {
    const parts = splitForIrc(text, this.lineBudget(conn, channel));
    if (parts.length === 0) throw new TransportError({ kind: 'rejected', detail: 'nothing to send: the text is empty' });
    const ids: string[] = [];
    let confirmed = true;
    for (const [i, part] of parts.entries()) {
      const earlier = alreadySent.get(i);
      if (earlier !== undefined) {
        ids.push(earlier);
        continue;
      }
      const tag = parts.length === 1 ? key : `${key}:${i}/${parts.length}`;
      // A failure after a part of this call went out may have created something (partway).
      const r = await conn.send(channel, part, { [DELIVERY_TAG]: tag }, signal).catch((err: unknown) => partway(err, ids.some((_, j) => !alreadySent.has(j))));
      this.options.metrics.line(link, r.confirmed);
      confirmed &&= r.confirmed;
      ids.push(r.msgid ?? '');
    }
    return { messageIds: ids, confirmed };
  }

  // --- facets ---

  readonly sender = {
    /** A protocol post, under Herald's own nick. */
    send: async (channelId: string, message: OutgoingMessage, idempotencyKey: string, signal: AbortSignal): Promise<SentMessage> => {
      const channel = ircChannel(channelId);
      await this.observe(channel);
      const sent = await this.sendParts(this.observer, 'observer', channel, renderForIrc(message), idempotencyKey, new Map(), signal);
      return { channelId: channel, messageId: sent.messageIds.at(-1) ?? '', confirmed: sent.confirmed };
    },
  };

  readonly history = {
    selfId: async (): Promise<string> => this.held?.nick || this.options.nick,
    fingerprint: (message: OutgoingMessage): string => renderForIrc(message),
    listBetween: async (channelId: string, from: Date, until: Date, max: number): Promise<{ messages: SeenMessage[]; complete: boolean }> => {
      const channel = ircChannel(channelId);
      await this.observe(channel);
      const rows = await linesBetween(this.options.db, channel, from, until, max + 1);
      // Only a window the observer's record holds can show a message is not there.
      this.recordHolds(channel, from);
      const messages = rows.slice(0, max).map((r) => ({ channelId: channel, messageId: r.msgid ?? r.id, authorId: r.nick, createdAt: r.at, fingerprint: r.text }));
      return { messages, complete: rows.length <= max };
    },
  };

  readonly channels = {
    getChannel: async (channelId: string): Promise<ChannelInfo | undefined> => {
      if (!CHANNEL.test(ircChannel(channelId))) return undefined;
      const channel = ircChannel(channelId);
      return { id: channel, guildId: undefined, name: channel, isText: true };
    },
    check: (channel: string): string | undefined => this.chat.checkChannel(channel),
  };

  readonly members = {
    listMembers: async (channelId: string): Promise<MemberInfo[]> => (await this.chat.members(channelId)).map((nick) => ({ userId: nick, displayName: nick, bot: false })),
  };

  readonly chat: Chat = {
    // One connection per sender nick, paced in call order (irc-connection.ts).
    pacedBySender: true,
    checkSender: (sender) => {
      if (!NICK.test(sender) || sender.length > NICK_MAX) return 'sender must be an IRC nick: a letter or one of []\\`_^{|} first, then letters, digits, those or -, at most 30';
      if (sender.toLowerCase() === this.options.nick.toLowerCase()) return `sender ${sender} is Herald's own observer nick`;
      return undefined;
    },
    checkChannel: (channel) => (CHANNEL.test(ircChannel(channel)) ? undefined : 'channel must be an IRC channel name (#name: no spaces, commas or colons, at most 50 characters)'),
    checkText: (text) => ircTextProblem(text),
    send: async (channel, text, sender, key, alreadySent, signal) => {
      const name = ircChannel(channel);
      // The observer is in the channel first, so the lines are read back (and kept) as they go out.
      await this.observe(name);
      const conn = await this.senderConnection(sender);
      await conn.join(name);
      try {
        return await this.sendParts(conn, 'sender', name, text, key, alreadySent, signal);
      } finally {
        const entry = this.senders.get(sender.toLowerCase());
        if (entry !== undefined) entry.lastUsed = Date.now();
      }
    },
    sentParts: async (channel, key, _signal, sent) => {
      const name = ircChannel(channel);
      await this.observe(name);
      // Without message-tags the observer never sees the tags: it cannot tell.
      if (!this.observer.caps.messageTags) return undefined;
      const found = new Map<number, string>();
      let count: number | undefined;
      for (const row of await linesTagged(this.options.db, name, key)) {
        const tag = row.delivery_tag === null ? undefined : parseTag(row.delivery_tag);
        // The tag is a client tag any member can forge: only the send's own sender nick wrote its parts.
        if (tag === undefined || tag.key !== key || row.nick.toLowerCase() !== sent.sender.toLowerCase()) continue;
        found.set(tag.index, row.msgid ?? row.id);
        count = tag.count;
      }
      // Every part found needs no record of the rest; a part not found is missing only if the record holds the whole span.
      if (count === undefined || found.size < count) this.recordHolds(name, sent.since);
      return found;
    },
    read: async (channel, since, limit): Promise<ChatLine[]> => {
      const name = ircChannel(channel);
      // Another replica's observer reads into the store: have it join the channel (stored), and read what it kept.
      await (this.held === undefined ? addChannel(this.options.db, name, new Date()) : this.observe(name));
      return (await readLines(this.options.db, name, since, limit)).map((r) => ({ nick: r.nick, text: r.text, at: r.at }));
    },
    createChannel: async (name) => {
      const channel = ircChannel(name);
      if (this.held !== undefined) await this.observe(channel);
      await addChannel(this.options.db, channel, new Date());
      return channel;
    },
    listChannels: async () => {
      const listed = await this.observer.list();
      return [...new Set([...listed.map((c) => c.toLowerCase()), ...this.observer.channels])].sort();
    },
    members: async (channel) => {
      const nicks = await this.observer.names(ircChannel(channel));
      const self = this.observer.nick.toLowerCase();
      return nicks.filter((n) => n.toLowerCase() !== self).sort((a, b) => a.localeCompare(b));
    },
  };
}
