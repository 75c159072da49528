import type {
  ArchivedMessage,
  ChannelInfo,
  HistoryPages,
  Chat,
  ChatLine,
  InboundMessage,
  MemberInfo,
  OutgoingMessage,
  SeenMessage,
  SentMessage,
  Platform,
  TransportFailure,
} from '../platform.js';
import { TransportError } from '../platform.js';
import { discordMessageLink, discordMessageUrl } from '../discord/message-links.js';

/** A message as the memory platform keeps it. */
export interface MemoryMessage {
  id: string;
  channelId: string;
  authorId: string;
  message: OutgoingMessage;
  createdAt: Date;
  edits: number;
  idempotencyKey?: string;
  /** A chat send's sender name (chat sends are Herald's messages, shown under the agent's name). */
  sender?: string;
}

interface MemoryChannel extends ChannelInfo {
  /** Direct-message channel: the other user. */
  dmWith?: string;
  members: Set<string>;
}

/** How a call of the memory platform misbehaves, once per `times` matching calls. */
export interface MemoryFault {
  op: 'send' | 'edit' | 'openDm' | 'list' | 'getChannel';
  failure: TransportFailure;
  /** send only: create the message first, then fail (a lost answer). */
  afterCreate?: boolean;
  times?: number;
}

export interface MemoryTransportOptions {
  selfId?: string;
  /**
   * How long a repeated idempotency key returns the first message (Discord's nonce window).
   * Shortcut: the window is measured on the `now` clock when the resend arrives, with no queue or
   * rate limit between the send and the platform; on Discord a resend may leave later than it
   * was decided (a held request past the window is a second message). The real path is tested in
   * test/send-proof.test.ts and test/in-doubt.test.ts against the sandbox.
   */
  idempotencyWindowMs?: number;
  now?: () => Date;
}

/**
 * A chat platform in memory, complete enough to run every module's service-level tests with no
 * HTTP and no sandbox: channels (guild and direct), members, send with idempotency keys, edits,
 * history, inbound messages, and injected failures.
 */
export class MemoryPlatform implements Platform {
  readonly name = 'memory' as const;
  readonly idempotentSend = true;
  // It stands in for Discord (its ids are Discord's shape), and answers Discord's links.
  readonly messageUrl = discordMessageUrl;
  readonly messageLink = discordMessageLink;
  readonly selfUserId: string;
  readonly channelsById = new Map<string, MemoryChannel>();
  readonly messages: MemoryMessage[] = [];
  private readonly users = new Map<string, { displayName: string; bot: boolean; dmsClosed: boolean }>();
  private readonly keys = new Map<string, { messageId: string; at: number }>();
  private readonly faults: (MemoryFault & { remaining: number })[] = [];
  private readonly listeners = new Set<(m: InboundMessage) => void>();
  private readonly windowMs: number;
  private readonly now: () => Date;
  private lastId = 0n;
  /** History with media, by channel, oldest first (the archive's tests write it). */
  readonly archived = new Map<string, ArchivedMessage[]>();
  readonly pages: HistoryPages = {
    pageBefore: async (channelId, beforeId, limit) => {
      const list = this.archived.get(channelId) ?? [];
      const end = beforeId === undefined ? list.length : list.findIndex((m) => BigInt(m.id) >= BigInt(beforeId));
      const stop = end === -1 ? list.length : end;
      return list.slice(Math.max(0, stop - limit), stop).reverse();
    },
  };

  constructor(options: MemoryTransportOptions = {}) {
    this.selfUserId = options.selfId ?? '100000000000000001';
    this.windowMs = options.idempotencyWindowMs ?? 5 * 60_000;
    this.now = options.now ?? (() => new Date());
    this.users.set(this.selfUserId, { displayName: 'Herald', bot: true, dmsClosed: false });
  }

  // --- the platform's own state, for tests ---

  addUser(id: string, displayName: string, options: { bot?: boolean; dmsClosed?: boolean } = {}): this {
    this.users.set(id, { displayName, bot: options.bot ?? false, dmsClosed: options.dmsClosed ?? false });
    return this;
  }

  addChannel(id: string, options: { guildId?: string; name?: string; isText?: boolean; members?: string[] } = {}): this {
    this.channelsById.set(id, {
      id,
      guildId: options.guildId,
      name: options.name,
      isText: options.isText ?? true,
      members: new Set([this.selfUserId, ...(options.members ?? [])]),
    });
    return this;
  }

  inject(fault: MemoryFault): void {
    this.faults.push({ ...fault, remaining: fault.times ?? 1 });
  }

  clearFaults(): void {
    this.faults.length = 0;
  }

  messagesIn(channelId: string): MemoryMessage[] {
    return this.messages.filter((m) => m.channelId === channelId);
  }

  /** Someone writes in a channel: stored, and handed to inbound listeners. */
  receive(channelId: string, authorId: string, content: string): InboundMessage {
    const channel = this.requireChannel(channelId);
    const stored = this.store(channel.id, authorId, { content });
    const inbound: InboundMessage = {
      channelId,
      messageId: stored.id,
      authorId,
      authorIsBot: this.users.get(authorId)?.bot ?? false,
      guildId: channel.guildId,
      content,
      createdAt: stored.createdAt,
    };
    for (const l of this.listeners) l(inbound);
    return inbound;
  }

  // --- facets ---

  readonly sender = {
    send: async (channelId: string, message: OutgoingMessage, idempotencyKey: string, signal: AbortSignal): Promise<SentMessage> => {
      signal.throwIfAborted();
      const channel = this.requireChannel(channelId);
      if (channel.dmWith !== undefined && this.users.get(channel.dmWith)?.dmsClosed) {
        throw new TransportError({ kind: 'recipient_unreachable', detail: 'memory: the user does not accept direct messages' });
      }
      const fault = this.takeFault('send');
      if (fault !== undefined && fault.afterCreate !== true) throw new TransportError(fault.failure);
      const key = `${channelId}:${idempotencyKey}`;
      const earlier = this.keys.get(key);
      const nowMs = this.now().getTime();
      let sent = earlier !== undefined && nowMs - earlier.at <= this.windowMs ? this.messages.find((m) => m.id === earlier.messageId) : undefined;
      if (sent === undefined) {
        sent = this.store(channelId, this.selfUserId, message, idempotencyKey);
        this.keys.set(key, { messageId: sent.id, at: nowMs });
      }
      if (fault !== undefined) throw new TransportError(fault.failure);
      return { channelId, messageId: sent.id };
    },
  };

  readonly dms = {
    openDm: async (userId: string, signal: AbortSignal): Promise<string> => {
      signal.throwIfAborted();
      this.failIfFaulted('openDm');
      if (!this.users.has(userId)) throw new TransportError({ kind: 'not_found', detail: 'memory: unknown user' });
      const existing = [...this.channelsById.values()].find((c) => c.dmWith === userId);
      if (existing !== undefined) return existing.id;
      const id = this.nextId();
      this.channelsById.set(id, { id, guildId: undefined, isText: true, dmWith: userId, members: new Set([this.selfUserId, userId]) });
      return id;
    },
  };

  readonly editor = {
    edit: async (channelId: string, messageId: string, message: OutgoingMessage, signal: AbortSignal): Promise<void> => {
      signal.throwIfAborted();
      this.failIfFaulted('edit');
      const stored = this.messages.find((m) => m.id === messageId && m.channelId === channelId);
      if (stored === undefined) throw new TransportError({ kind: 'not_found', detail: 'memory: unknown message' });
      stored.message = { ...stored.message, ...message };
      stored.edits += 1;
    },
  };

  readonly history = {
    selfId: async (): Promise<string> => this.selfUserId,
    fingerprint: (message: OutgoingMessage): string => JSON.stringify([message.content ?? '', message.card ?? null, message.links ?? []]),
    listBetween: async (channelId: string, from: Date, until: Date, max: number, signal: AbortSignal): Promise<{ messages: SeenMessage[]; complete: boolean }> => {
      signal.throwIfAborted();
      this.failIfFaulted('list');
      const inWindow = this.messagesIn(channelId).filter((m) => m.createdAt >= from && m.createdAt <= until);
      const messages = inWindow.slice(0, max).map((m) => ({
        channelId,
        messageId: m.id,
        authorId: m.authorId,
        createdAt: m.createdAt,
        fingerprint: this.history.fingerprint(m.message),
      }));
      return { messages, complete: inWindow.length <= max };
    },
  };

  readonly channels = {
    getChannel: async (channelId: string): Promise<ChannelInfo | undefined> => {
      this.failIfFaulted('getChannel');
      const c = this.channelsById.get(channelId);
      return c === undefined ? undefined : { id: c.id, guildId: c.guildId, name: c.name, isText: c.isText };
    },
  };

  readonly members = {
    listMembers: async (channelId: string): Promise<MemberInfo[]> =>
      [...this.requireChannel(channelId).members].map((userId) => ({
        userId,
        displayName: this.users.get(userId)?.displayName ?? userId,
        bot: this.users.get(userId)?.bot ?? false,
      })),
  };

  readonly inbound = {
    onMessage: (listener: (m: InboundMessage) => void): (() => void) => {
      this.listeners.add(listener);
      return () => this.listeners.delete(listener);
    },
  };

  /** The chat tools on the memory platform: a channel is named by its name (a leading # ignored) or id. */
  readonly chat: Chat = {
    checkSender: (sender) => (/^\S{1,32}$/.test(sender) ? undefined : 'sender must be 1..32 characters without spaces'),
    checkChannel: (channel) => (/^#?\S{1,99}$/.test(channel) ? undefined : 'channel must be a name without spaces'),
    checkText: () => undefined,
    send: async (channel, text, sender, key, alreadySent, signal) => {
      signal.throwIfAborted();
      const c = this.chatChannel(channel);
      const earlier = alreadySent.get(0);
      if (earlier !== undefined) return { messageIds: [earlier], confirmed: true };
      const fault = this.takeFault('send');
      if (fault !== undefined && fault.afterCreate !== true) throw new TransportError(fault.failure);
      const stored = this.store(c.id, this.selfUserId, { content: text }, key, sender);
      if (fault !== undefined) throw new TransportError(fault.failure);
      return { messageIds: [stored.id], confirmed: true };
    },
    // Shortcut: the key is stored on the message itself, so every part ever sent is found,
    // exactly and forever. Discord keeps no such key: its chat proof reads channel history and
    // the gateway's reported nonces, bounded in time and count (src/platforms/discord/discord-chat.ts),
    // tested past the nonce window by a restarted Herald in test/send-proof.test.ts.
    sentParts: async (channel, key) => {
      const c = this.chatChannel(channel);
      const found = this.messagesIn(c.id).find((m) => m.idempotencyKey === key);
      return new Map(found === undefined ? [] : [[0, found.id]]);
    },
    read: async (channel, since, limit): Promise<ChatLine[]> =>
      this.messagesIn(this.chatChannel(channel).id)
        .filter((m) => since === undefined || m.createdAt > since)
        .reverse()
        .slice(0, limit)
        .map((m) => ({ nick: m.sender ?? this.users.get(m.authorId)?.displayName ?? m.authorId, text: m.message.content ?? '', at: m.createdAt })),
    createChannel: async (name) => {
      const bare = name.replace(/^#/, '');
      const existing = [...this.channelsById.values()].find((c) => c.name === bare);
      if (existing === undefined) this.addChannel(this.nextId(), { name: bare });
      return bare;
    },
    listChannels: async () => [...this.channelsById.values()].flatMap((c) => (c.dmWith === undefined && c.name !== undefined ? [c.name] : [])).sort(),
    members: async (channel) =>
      [...this.chatChannel(channel).members].filter((id) => id !== this.selfUserId).map((id) => this.users.get(id)?.displayName ?? id).sort(),
  };

  private chatChannel(channel: string): MemoryChannel {
    const bare = channel.replace(/^#/, '');
    const c = this.channelsById.get(bare) ?? [...this.channelsById.values()].find((x) => x.name === bare && x.dmWith === undefined);
    if (c === undefined) throw new TransportError({ kind: 'not_found', detail: 'memory: unknown channel' });
    return c;
  }

  private store(channelId: string, authorId: string, message: OutgoingMessage, idempotencyKey?: string, sender?: string): MemoryMessage {
    const stored: MemoryMessage = {
      id: this.nextId(),
      channelId,
      authorId,
      message,
      createdAt: this.now(),
      edits: 0,
      ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
      ...(sender !== undefined ? { sender } : {}),
    };
    this.messages.push(stored);
    return stored;
  }

  private requireChannel(channelId: string): MemoryChannel {
    const c = this.channelsById.get(channelId);
    if (c === undefined) throw new TransportError({ kind: 'not_found', detail: 'memory: unknown channel' });
    return c;
  }

  private takeFault(op: MemoryFault['op']): MemoryFault | undefined {
    const i = this.faults.findIndex((f) => f.op === op);
    const fault = this.faults[i];
    if (fault === undefined) return undefined;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.faults.splice(i, 1);
    return fault;
  }

  private failIfFaulted(op: MemoryFault['op']): void {
    const fault = this.takeFault(op);
    if (fault !== undefined) throw new TransportError(fault.failure);
  }

  /** Increasing ids, like snowflakes: later messages sort after earlier ones. */
  private nextId(): string {
    this.lastId += 1n;
    return String(200000000000000000n + this.lastId);
  }
}
