import {
  DefaultRestOptions,
  DiscordAPIError,
  REST,
  ChannelType,
  Routes,
  type APIChannel,
  type APIMessage,
  type APIUser,
  type RESTPatchAPIChannelMessageJSONBody,
  type RESTPostAPIChannelMessageJSONBody,
} from 'discord.js';
import { discordChannelIdProblem } from './discord-channels.js';
import { call, measured, toTransportError } from './discord-calls.js';
import { beforeLeaving, LeaseLostError, outsideFences } from '../../infra/faults/fence.js';
import { DISCORD_MAX_FILE_BYTES, DISCORD_MAX_FILES, DISCORD_MAX_REQUEST_BYTES, fingerprintOf, nonceOf, toDiscordMessage, withFiles } from './discord-messages.js';
import { discordMessageLink, discordMessageUrl } from './message-links.js';
import { DiscordChat } from './discord-chat.js';
import { DiscordInboundHistory } from './discord-inbound-history.js';
import { TransportError, type ArchivedMessage, type ChannelInfo, type Channels, type Chat, type Deleter, type DirectMessages, type Editor, type Reactions, type History, type HistoryPages, type Mentions, type NonceLedger, type FileLimits, type OutgoingMessage, type SeenMessage, type SendDeadline, type Sender, type SentMessage, type Threading, type Platform } from '../platform.js';
import type { PlatformMetrics } from './discord.metrics.js';
import { snowflakeAt, snowflakeTime } from './snowflake.js';

/** Discord's "Unknown Message": a delete that finds it gone has nothing left to do. */
const UNKNOWN_MESSAGE = 10008;
/** Longest 429 wait Herald lets discord.js sit out inside one attempt; longer ones reschedule. */
const MAX_INLINE_RATE_LIMIT_MS = 5_000;

export interface DiscordTransportOptions {
  token: string;
  /** Base of the REST API without the version, e.g. https://discord.com/api. */
  apiUrl: string | undefined;
  timeoutMs: number;
  /**
   * Waits for this request's turn in a budget shared with the other processes using this bot
   * (Discord's global limit is per bot). Called before each request leaves, retries included.
   */
  pace?: (signal: AbortSignal | undefined) => Promise<void>;
  /** Counts Discord's answers (status, 429 scope). */
  metrics?: PlatformMetrics;
  /** The guild the chat tools use (`HERALD_DISCORD_CHAT_GUILD`); undefined: the bot's only one. */
  chatGuildId?: string | undefined;
  /** Largest file one message may carry (`HERALD_DISCORD_MAX_FILE_BYTES`); default Discord's 10 MiB. */
  maxFileBytes?: number | undefined;

}

/**
 * Discord over REST only (no gateway), so any number of workers can send. Every facet: sending
 * with a nonce (`enforce_nonce`), DMs, edits, history, channels. The gateway (commands, inbound
 * events, nonce reports) is gateway-client.ts, held by one `serve`.
 */
export class DiscordPlatform implements Platform {
  readonly name = 'discord' as const;
  readonly title = 'Discord';
  readonly idempotentSend = true;
  readonly messageUrl = discordMessageUrl;
  readonly messageLink = discordMessageLink;
  readonly files: FileLimits;
  readonly sender: Sender = { send: (channelId, message, nonce, signal, mentions, deadline) => this.createMessage(channelId, message, nonce, signal, mentions, deadline) };
  readonly dms: DirectMessages = { openDm: (userId, signal) => this.openDm(userId, signal) };
  readonly editor: Editor = { edit: (channelId, messageId, message, signal) => this.editMessage(channelId, messageId, message, signal) };
  readonly reactions: Reactions = {
    add: (channelId, messageId, emoji, signal) => this.react('put', channelId, messageId, emoji, signal),
    remove: (channelId, messageId, emoji, signal) => this.react('delete', channelId, messageId, emoji, signal),
  };
  readonly deleter: Deleter = { delete: (channelId, messageId, signal) => this.deleteMessage(channelId, messageId, signal) };
  /** Replies (`message_reference`) and threads (a thread is a channel of its own, under its parent). */
  readonly threading: Threading = { replies: true, threads: true, inThread: (channelId, threadId) => this.inThread(channelId, threadId) };
  readonly history: History = {
    selfId: () => this.selfId(),
    fingerprint: (message) => this.fingerprint(message),
    listBetween: (channelId, from, until, max, signal) => this.listMessagesBetween(channelId, from, until, max, signal),
  };
  readonly channels: Channels = { getChannel: (channelId) => this.getChannel(channelId), check: discordChannelIdProblem };
  readonly pages: HistoryPages = { pageBefore: (channelId, beforeId, limit, signal) => this.pageBefore(channelId, beforeId, limit, signal) };
  readonly chat: Chat;
  /** Reading back messages others wrote (handoffs' catch-up); the gateway says when it is held. */
  readonly recent: DiscordInboundHistory;
  private readonly rest: REST;
  private self: Promise<string> | undefined;
  /** The gateway's nonce reports, once the store is open (see `useNonceLedger`). */
  private ledger: NonceLedger | undefined;
  /**
   * Creates under way, by nonce, with how many of their tries may have created the message: counted
   * once discord.js hands a try to the network, uncounted when Discord refuses it outright (a 4xx).
   * A create that failed before that (aborted in discord.js's queue, refused by a rate limit)
   * created nothing.
   */
  private readonly creates = new Map<string, { tries: number; deadline: SendDeadline | undefined }>();

  /**
   * Discord answered 401: the token is revoked or reset. discord.js forgets a token it saw refused,
   * so this bot sends nothing more until Herald restarts with a valid one (each send then fails at
   * once, TOKEN_FORGOTTEN); /readyz says so.
   */
  tokenRejected = false;

  /** A 401 to a request made with the bot token (an interaction callback carries none: its 401 says nothing of the token). */
  private seen<R extends { status: number }>(init: { headers?: unknown }, res: R): R {
    if (res.status === 401 && new Headers(init.headers as ConstructorParameters<typeof Headers>[0]).has('authorization')) this.tokenRejected = true;
    return res;
  }

  constructor(options: DiscordTransportOptions) {
    this.files = { maxFileBytes: options.maxFileBytes ?? DISCORD_MAX_FILE_BYTES, maxFiles: DISCORD_MAX_FILES, maxRequestBytes: DISCORD_MAX_REQUEST_BYTES };
    this.rest = new REST({
      version: '10',
      ...(options.apiUrl !== undefined ? { api: options.apiUrl } : {}),
      makeRequest: async (url, init) => {
        await options.pace?.(init.signal ?? undefined);
        const nonce = init.method === 'POST' && this.creates.size > 0 ? nonceOf(init.body) : undefined;
        const create = typeof nonce === 'string' ? this.creates.get(nonce) : undefined;
        if (create !== undefined) {
          // The last moment before the request leaves (after the shared budget and discord.js's
          // queue): a repeat past its nonce deadline would create a second message, so it stays home.
          const { deadline } = create;
          if (deadline !== undefined && Date.now() > deadline.notAfter.getTime()) throw new DepartedLateError();
          // discord.js repeats a request whose answer was lost or slow; a create is never repeated
          // by the client, outside the engine's doubt and nonce-deadline rules: the engine decides.
          if (create.tries > 0) throw new NotRepeatedError();
        }
        // Every request of a job leaves only while the job's lease (and an edit's lease) holds.
        beforeLeaving();
        if (create === undefined) return this.seen(init, await measured(options.metrics, init.method ?? 'GET', () => DefaultRestOptions.makeRequest(url, init)));
        create.tries += 1;
        const res = this.seen(init, await measured(options.metrics, 'POST', () => DefaultRestOptions.makeRequest(url, init)));
        // Refused outright (a 4xx, a 429 included): Discord created nothing, and may be asked again.
        if (res.status >= 400 && res.status < 500) create.tries -= 1;
        return res;
      },
      timeout: options.timeoutMs,
      retries: 2,
      rejectOnRateLimit: (info) => info.retryAfter > MAX_INLINE_RATE_LIMIT_MS,
    }).setToken(options.token);
    const metrics = options.metrics;
    if (metrics !== undefined) this.rest.on('rateLimited', (info) => metrics.rateLimitWait('discord', info.scope));
    this.chat = new DiscordChat({
      rest: this.rest,
      guildId: options.chatGuildId,
      selfId: () => this.selfId(),
      send: (channelId, content, nonce, signal, deadline) => this.createMessage(channelId, { content }, nonce, signal, undefined, deadline),
      history: this.history,
      ledger: () => this.ledger,
      call,
    });
    this.recent = new DiscordInboundHistory({ rest: this.rest, call, selfId: () => this.selfId() });
  }

  /**
   * Which message a nonce created, as the gateway reported it (the ledger `onOwnMessage` fills):
   * part of how a chat send is proven past the nonce window. Set once the store is open.
   */
  useNonceLedger(ledger: NonceLedger): void {
    this.ledger = ledger;
  }

  /** https://discord.com/developers/docs/resources/message#create-message */
  private async createMessage(channelId: string, message: OutgoingMessage, nonce: string, signal: AbortSignal, mentions?: Mentions, deadline?: SendDeadline): Promise<SentMessage> {
    const body: RESTPostAPIChannelMessageJSONBody = {
      ...toDiscordMessage(message),
      nonce,
      enforce_nonce: true,
      // A reply whose message is gone by now is still posted, without the reference (a person
      // still gets the message; the delivery is not failed for a deletion it could not prevent).
      ...(message.replyTo !== undefined ? { message_reference: { message_id: message.replyTo, fail_if_not_exists: false } } : {}),
      // Nobody is notified, except the users a handoff names (its target bot); never a reply ping.
      allowed_mentions: mentions !== undefined && mentions.users.length > 0 ? { parse: [], users: [...mentions.users] } : { parse: [] },
    };
    // One create per nonce at a time in this process: the dispatcher holds the delivery's lease.
    const create = { tries: 0, deadline };
    this.creates.set(nonce, create);
    try {
      const sent = (await this.rest.post(Routes.channelMessages(channelId), { body, signal, ...withFiles(body, message.files) })) as APIMessage;
      return { channelId: sent.channel_id, messageId: sent.id };
    } catch (err) {
      if (err instanceof LeaseLostError) throw err;
      if (err instanceof NotRepeatedError) throw new TransportError({ kind: 'transient', detail: err.message, mayHaveCreated: true });
      if (err instanceof DepartedLateError) {
        // Nothing left this time; an earlier try of this call may have created the message.
        throw new TransportError({ kind: 'transient', detail: err.message, departedLate: true, ...(create.tries > 0 ? { mayHaveCreated: true } : {}) });
      }
      const failure = toTransportError(err).failure;
      // Discord refuses before creating anything when it answers 4xx (429 included): such tries are
      // not counted. One that was not refused (a 5xx, a lost answer) may have created the message.
      const mayHaveCreated = create.tries > 0;
      if (!mayHaveCreated) throw new TransportError(failure);
      // In doubt, a refusal of the last try is no verdict on the message: retry (with the nonce,
      // or after reconciling) and let the doubt decide what is reported.
      throw new TransportError({ kind: 'transient', detail: failure.detail, mayHaveCreated: true, ...(failure.kind === 'transient' && failure.retryAfterMs !== undefined ? { retryAfterMs: failure.retryAfterMs } : {}) });
    } finally {
      this.creates.delete(nonce);
    }
  }

  /** A thread under `channelId`, by the thread channel's parent (read now): messages go to the thread's own channel. */
  private async inThread(channelId: string, threadId: string): Promise<{ channelId: string } | { refused: string }> {
    const thread = await this.getChannel(threadId);
    if (thread === undefined) return { refused: `thread ${threadId} not found` };
    if (thread.parentId !== channelId) return { refused: `${threadId} is not a thread of the destination's channel ${channelId}` };
    return { channelId: threadId };
  }

  /** https://discord.com/developers/docs/resources/user#create-dm */
  private async openDm(userId: string, signal: AbortSignal): Promise<string> {
    const channel = (await call(() => this.rest.post(Routes.userChannels(), { body: { recipient_id: userId }, signal }))) as APIChannel;
    return channel.id;
  }

  /** https://discord.com/developers/docs/resources/message#edit-message */
  private async editMessage(channelId: string, messageId: string, message: OutgoingMessage, signal: AbortSignal): Promise<void> {
    const body: RESTPatchAPIChannelMessageJSONBody = { ...toDiscordMessage(message), allowed_mentions: { parse: [] } };
    await call(() => this.rest.patch(Routes.channelMessage(channelId, messageId), { body, signal }));
  }

  /**
   * https://discord.com/developers/docs/resources/message#create-reaction and #delete-own-reaction:
   * both idempotent on Discord (a reaction already there, or already gone, answers 204). The emoji
   * is URL-encoded, a unicode one or `name:id`.
   */
  private async react(method: 'put' | 'delete', channelId: string, messageId: string, emoji: string, signal: AbortSignal): Promise<void> {
    const route = Routes.channelMessageOwnReaction(channelId, messageId, encodeURIComponent(emoji));
    await call(() => (method === 'put' ? this.rest.put(route, { signal }) : this.rest.delete(route, { signal })));
  }

  /** https://discord.com/developers/docs/resources/message#delete-message: Unknown Message is already done. */
  private async deleteMessage(channelId: string, messageId: string, signal: AbortSignal): Promise<void> {
    try {
      await this.rest.delete(Routes.channelMessage(channelId, messageId), { signal });
    } catch (err) {
      if (err instanceof DiscordAPIError && err.code === UNKNOWN_MESSAGE) return;
      throw toTransportError(err);
    }
  }

  /** https://discord.com/developers/docs/resources/message#get-channel-messages */
  private async listMessagesBetween(channelId: string, from: Date, until: Date, max: number, signal: AbortSignal): Promise<{ messages: SeenMessage[]; complete: boolean }> {
    const messages: SeenMessage[] = [];
    let after = snowflakeAt(from);
    for (;;) {
      const query = new URLSearchParams({ after, limit: '100' });
      const page = (await call(() => this.rest.get(Routes.channelMessages(channelId), { query, signal }))) as APIMessage[];
      // Discord returns newest first; walk oldest first.
      const ordered = [...page].sort((a, b) => compareSnowflakes(a.id, b.id));
      for (const m of ordered) {
        const createdAt = snowflakeTime(m.id);
        if (createdAt.getTime() > until.getTime()) return { messages, complete: true };
        if (messages.length >= max) return { messages, complete: false };
        messages.push({ channelId: m.channel_id, messageId: m.id, authorId: m.author.id, createdAt, fingerprint: fingerprintOf(m.content, m.embeds, m.components ?? [], (m.attachments ?? []).map((a) => a.filename)) });
      }
      if (page.length < 100) return { messages, complete: true };
      after = ordered[ordered.length - 1]?.id ?? after;
    }
  }

  /**
   * https://discord.com/developers/docs/resources/message#get-channel-messages with `before`:
   * paced like every request (the shared pacer) and by discord.js's per-route buckets.
   */
  private async pageBefore(channelId: string, beforeId: string | undefined, limit: number, signal: AbortSignal): Promise<ArchivedMessage[]> {
    const query = new URLSearchParams({ limit: String(Math.min(100, Math.max(1, limit))) });
    if (beforeId !== undefined) query.set('before', beforeId);
    const page = (await call(() => this.rest.get(Routes.channelMessages(channelId), { query, signal }))) as APIMessage[];
    return [...page].sort((a, b) => compareSnowflakes(b.id, a.id)).map((m) => ({
      id: m.id,
      channelId: m.channel_id,
      authorId: m.author.id,
      authorName: m.author.global_name ?? m.author.username,
      createdAt: snowflakeTime(m.id),
      content: m.content,
      attachments: (m.attachments ?? []).map((a) => ({ id: a.id, url: a.url, filename: a.filename, contentType: a.content_type ?? null, size: typeof a.size === 'number' ? a.size : null })),
      embeds: (m.embeds ?? []).map((e) => ({
        type: e.type ?? null,
        url: e.url ?? null,
        image: e.image?.url ?? null,
        thumbnail: e.thumbnail?.url ?? null,
        video: e.video?.url ?? null,
      })),
    }));
  }

  /** https://discord.com/developers/docs/resources/channel#get-channel */
  private async getChannel(channelId: string): Promise<ChannelInfo | undefined> {
    try {
      const channel = (await call(() => this.rest.get(Routes.channel(channelId)))) as APIChannel;
      const guildId = 'guild_id' in channel && typeof channel.guild_id === 'string' ? channel.guild_id : undefined;
      const isText = channel.type === ChannelType.GuildText || channel.type === ChannelType.GuildAnnouncement;
      const name = 'name' in channel && typeof channel.name === 'string' ? channel.name : undefined;
      const parentId = isThreadType(channel.type) && 'parent_id' in channel && typeof channel.parent_id === 'string' ? channel.parent_id : undefined;
      return { id: channel.id, guildId, name, isText, ...(parentId !== undefined ? { parentId } : {}) };
    } catch (err) {
      if (err instanceof TransportError && err.failure.kind === 'not_found') return undefined;
      throw err;
    }
  }

  /**
   * Ask Discord whose token this is (https://discord.com/developers/docs/resources/user#get-current-user),
   * so a token Discord rejects stops start-up instead of failing every delivery later. Throws
   * DiscordTokenRejectedError for a 401, a TransportError when Discord cannot answer.
   */
  /** Ask Discord whose token this is: the bot's user id. */
  async verifyToken(signal: AbortSignal): Promise<string> {
    try {
      const user = (await this.rest.get(Routes.user('@me'), { signal })) as APIUser;
      this.self = Promise.resolve(user.id);
      return user.id;
    } catch (err) {
      if (err instanceof DiscordAPIError && err.status === 401) throw new DiscordTokenRejectedError(err.status, err.code);
      throw toTransportError(err);
    }
  }

  /** https://discord.com/developers/docs/resources/user#get-current-user */
  private selfId(): Promise<string> {
    // Shared by every caller: asked under no job's fence (src/infra/faults/fence.ts).
    this.self ??= outsideFences(() => call(() => this.rest.get(Routes.user('@me')))).then((u) => (u as APIUser).id);
    this.self.catch(() => (this.self = undefined));
    return this.self;
  }

  private fingerprint(message: OutgoingMessage): string {
    const m = toDiscordMessage(message);
    return fingerprintOf(m.content ?? '', m.embeds ?? [], m.components ?? [], (message.attachments ?? []).map((a) => a.filename));
  }
}

/**
 * A create held back past its nonce deadline, thrown before the request leaves. discord.js does
 * not retry it (its name is not AbortError and it has no network code).
 */
class DepartedLateError extends Error {
  constructor() {
    super('create abandoned before it left: past the nonce window of the earlier attempt');
    this.name = 'DepartedLateError';
  }
}

/**
 * A repeat of a create that discord.js would have made on its own (a lost or slow answer), held
 * back before it left: the first try may have created the message, so the engine takes it from
 * there, in doubt. discord.js does not retry it (its name is not AbortError and it has no network code).
 */
class NotRepeatedError extends Error {
  constructor() {
    super('create not repeated by the client: its answer was lost or slow');
    this.name = 'NotRepeatedError';
  }
}

/** Discord refused the bot token itself (401 Unauthorized): nothing Herald sends can succeed. */
export class DiscordTokenRejectedError extends Error {
  constructor(
    readonly status: number,
    readonly code: number | string,
  ) {
    super(`Discord rejected DISCORD_TOKEN (${status})`);
    this.name = 'DiscordTokenRejectedError';
  }
}


function compareSnowflakes(a: string, b: string): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}


/** Discord's thread channel types (announcement, public and private threads). */
function isThreadType(type: ChannelType): boolean {
  return type === ChannelType.AnnouncementThread || type === ChannelType.PublicThread || type === ChannelType.PrivateThread;
}
