import type { ChatPostMessageResponse, ConversationsCreateResponse, ConversationsHistoryResponse, ConversationsListResponse, ConversationsMembersResponse, UsersInfoResponse } from '@slack/web-api';
import type { Logger } from 'pino';
import { errorSummary } from '../../infra/errors.js';
import { TransportError, type Chat, type ChatLine, type ChatSendProof, type ChatSent, type SendDeadline } from '../platform.js';
import { isSlackCode, slackCallerOf, slackFailure, type SlackCall, type SlackClient } from './slack-chat-errors.js';
import { escapeSlack, plainSlack, splitForSlack } from './slack-chat-split.js';

/** The metadata event type every chat part carries, with the send's key and the part's index. */
export const HERALD_DELIVERY_EVENT = 'herald_delivery';
/** A Slack channel name (Slack keeps them lowercase), optionally written `#name`. */
const CHANNEL_NAME = /^#?[a-z0-9_-]{1,80}$/;
/** A channel id: C… (public or private channel) or G… (older private channels). */
const CHANNEL_ID = /^[CG][A-Z0-9]{6,}$/;
/** How long the channel list (name → id) is trusted. */
const CHANNELS_TTL_MS = 30_000;
/** How long a user's display name is trusted. */
const USERS_TTL_MS = 5 * 60_000;
/** How far before a send's start its parts are looked for: clock skew between Herald and Slack. */
const PROOF_SKEW_MS = 10_000;
/** How long a send waits out a rate limit on one part itself, rather than failing the attempt, and how often. */
const MAX_INLINE_WAIT_MS = 5_000;
const MAX_INLINE_WAITS = 3;
/** Messages of people and apps; joins, topic changes and the like are not chat lines. */
const CHAT_SUBTYPES = new Set([undefined, 'bot_message', 'me_message', 'thread_broadcast', 'file_share']);

export interface SlackChatOptions {
  /**
   * The Web API on the bot token (xoxb-…): the transport's own paced caller, or a WebClient
   * (which must not retry by itself: `retryConfig: { retries: 0 }`).
   */
  client: SlackClient;
  log: Logger;
  /** Herald's own bot user (auth.test's user_id): never listed among members. */
  selfId: () => Promise<string>;
}

interface SlackMessage {
  ts?: string;
  user?: string;
  username?: string;
  bot_id?: string;
  subtype?: string;
  text?: string;
  bot_profile?: { name?: string };
  metadata?: { event_type?: string; event_payload?: Record<string, unknown> };
}

/**
 * The chat tools on Slack: channels of the bot's workspace by name (or id). Each part of a send
 * is posted under the sender's name (`username`, the chat:write.customize scope) and carries the
 * send's key in its message metadata, so a later attempt finds exactly what an earlier one posted
 * (conversations.history with include_all_metadata), at any age, with no content matching.
 * Scopes: chat:write, chat:write.customize, channels:read, groups:read, channels:history,
 * groups:history, channels:manage, channels:join, users:read.
 */
export class SlackChat implements Chat {
  private channelList: { at: number; byName: Map<string, string> } | undefined;
  private readonly users = new Map<string, { at: number; name: string }>();
  private readonly call: SlackCall;

  constructor(private readonly o: SlackChatOptions) {
    this.call = slackCallerOf(o.client);
  }

  checkSender(sender: string): string | undefined {
    // Slack shows a custom username of up to 80 characters.
    // eslint-disable-next-line no-control-regex
    return sender.trim() !== '' && sender.length <= 80 && !/[\u0000-\u001f\u007f-\u009f]/.test(sender) ? undefined : 'sender must be 1..80 characters, without line breaks or control characters';
  }

  checkChannel(channel: string): string | undefined {
    return CHANNEL_NAME.test(channel) || CHANNEL_ID.test(channel) ? undefined : 'channel must be a Slack channel name (lowercase letters, digits, - and _, up to 80) or id (C…)';
  }

  /** Any text: it is escaped on the way out, so Slack shows it as written and it notifies no one. */
  checkText(): string | undefined {
    return undefined;
  }

  /** The channel's id: an id as given, a name through conversations.list (cached briefly). */
  private async channelId(channel: string): Promise<string> {
    if (CHANNEL_ID.test(channel)) return channel;
    const name = channel.replace(/^#/, '').toLowerCase();
    const fresh = this.channelList === undefined || Date.now() - this.channelList.at > CHANNELS_TTL_MS;
    let id = (fresh ? await this.refreshChannels() : this.channelList?.byName)?.get(name);
    // A channel created since the list was read: read it again once.
    if (id === undefined && !fresh) id = (await this.refreshChannels()).get(name);
    if (id === undefined) throw new TransportError({ kind: 'not_found', detail: `no channel ${name} in the Slack workspace` });
    return id;
  }

  private async refreshChannels(): Promise<Map<string, string>> {
    const byName = new Map<string, string>();
    let cursor: string | undefined;
    do {
      const page = await this.call<ConversationsListResponse>('conversations.list', { types: 'public_channel,private_channel', exclude_archived: true, limit: 200, ...(cursor ? { cursor } : {}) });
      for (const c of page.channels ?? []) if (c.id !== undefined && c.name !== undefined) byName.set(c.name, c.id);
      cursor = page.response_metadata?.next_cursor || undefined;
    } while (cursor !== undefined);
    this.channelList = { at: Date.now(), byName };
    return byName;
  }

  async send(channel: string, text: string, sender: string, key: string, alreadySent: ReadonlyMap<number, string>, signal: AbortSignal, deadline?: SendDeadline): Promise<ChatSent> {
    const channelId = await this.channelId(channel);
    const ids: string[] = [];
    let created = false;
    for (const [i, part] of splitForSlack(text).entries()) {
      const earlier = alreadySent.get(i);
      if (earlier !== undefined) {
        ids.push(earlier);
        continue;
      }
      try {
        ids.push(await this.postPart(channelId, escapeSlack(part), sender, key, i, signal, deadline));
        created = true;
      } catch (err) {
        // Parts this attempt got out are found again by their metadata on the next attempt.
        if (created && err instanceof TransportError && err.failure.kind === 'transient') throw new TransportError({ ...err.failure, mayHaveCreated: true });
        throw err;
      }
    }
    return { messageIds: ids, confirmed: true };
  }

  /**
   * Post one part; its ts. A rate limit (nothing created) is waited out here when short; a bot
   * not yet in a public channel joins it and posts again (`not_in_channel` created nothing).
   */
  private async postPart(channelId: string, text: string, sender: string, key: string, part: number, signal: AbortSignal, deadline: SendDeadline | undefined): Promise<string> {
    let joined = false;
    let waits = 0;
    for (;;) {
      try {
        const posted = await this.call<ChatPostMessageResponse>(
          'chat.postMessage',
          {
            channel: channelId,
            text,
            username: sender,
            // Escaped text, and nothing turned into a mention or a link: no one is notified.
            parse: 'none',
            link_names: false,
            metadata: { event_type: HERALD_DELIVERY_EVENT, event_payload: { id: key, part } },
          },
          { signal, deadline },
        );
        if (posted.ts === undefined) throw new TransportError({ kind: 'transient', detail: 'Slack answered chat.postMessage without a ts', mayHaveCreated: true });
        return posted.ts;
      } catch (err) {
        if (!joined && isSlackCode(err, 'not_in_channel')) {
          joined = true;
          await this.call('conversations.join', { channel: channelId }, { signal });
          continue;
        }
        const failure = slackFailure(err, 'chat.postMessage', true);
        if (failure === undefined) throw err;
        const wait = failure.kind === 'transient' && failure.mayHaveCreated !== true ? failure.retryAfterMs : undefined;
        if (wait !== undefined && wait <= MAX_INLINE_WAIT_MS && waits++ < MAX_INLINE_WAITS && (deadline === undefined || Date.now() + wait < deadline.notAfter.getTime())) {
          await sleep(wait, signal);
          continue;
        }
        throw new TransportError(failure);
      }
    }
  }

  /**
   * The parts of send `key` already in the channel (index → ts): every message since the send
   * began whose metadata carries this key, found by the key alone (never by content). Undefined
   * when the channel's history cannot be read (the bot left it, it was archived or deleted, a
   * missing scope); a passing failure (Slack not answering, a rate limit) is thrown, to be tried
   * again later.
   */
  async sentParts(channel: string, key: string, signal: AbortSignal, proof: ChatSendProof): Promise<Map<number, string> | undefined> {
    try {
      const channelId = await this.channelId(channel);
      const found = new Map<number, string>();
      const oldest = tsOf(new Date(proof.since.getTime() - PROOF_SKEW_MS));
      // Only Herald's own messages count: another app could carry the same metadata.
      const self = await this.o.selfId();
      let cursor: string | undefined;
      do {
        signal.throwIfAborted();
        const page = await this.call<ConversationsHistoryResponse>('conversations.history', { channel: channelId, oldest, include_all_metadata: true, limit: 200, ...(cursor ? { cursor } : {}) }, { signal });
        for (const m of (page.messages ?? []) as SlackMessage[]) {
          const meta = m.metadata;
          if (meta?.event_type !== HERALD_DELIVERY_EVENT || meta.event_payload?.['id'] !== key || m.ts === undefined || m.user !== self) continue;
          const part = meta.event_payload['part'];
          if (typeof part !== 'number' || !Number.isInteger(part) || part < 0) continue;
          // Pages come newest first: the oldest message of a part (the first one posted) wins.
          found.set(part, m.ts);
        }
        cursor = page.has_more === true ? page.response_metadata?.next_cursor || undefined : undefined;
      } while (cursor !== undefined);
      return found;
    } catch (err) {
      if (err instanceof TransportError && err.failure.kind !== 'transient') {
        this.o.log.warn({ err: errorSummary(err) }, 'cannot read the Slack channel for an earlier attempt\'s parts');
        return undefined;
      }
      throw err;
    }
  }

  async read(channel: string, since: Date | undefined, limit: number): Promise<ChatLine[]> {
    const channelId = await this.channelId(channel);
    // Lines are dated to the millisecond: `since` excludes every message of its own millisecond.
    const oldest = since === undefined ? undefined : `${tsOf(since).slice(0, -3)}999`;
    const lines: ChatLine[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.call<ConversationsHistoryResponse>('conversations.history', {
        channel: channelId,
        limit: Math.min(200, limit - lines.length + 10),
        ...(oldest ? { oldest, inclusive: false } : {}),
        ...(cursor ? { cursor } : {}),
      });
      for (const m of (page.messages ?? []) as SlackMessage[]) {
        if (m.ts === undefined || !CHAT_SUBTYPES.has(m.subtype) || (oldest !== undefined && Number(m.ts) <= Number(oldest))) continue;
        if (lines.length >= limit) break;
        lines.push({ nick: await this.nickOf(m), text: plainSlack(m.text ?? ''), at: dateOf(m.ts) });
      }
      cursor = page.has_more === true && lines.length < limit ? page.response_metadata?.next_cursor || undefined : undefined;
    } while (cursor !== undefined);
    // Slack answers newest first; sorted again in case a page boundary moved under us.
    return lines.sort((a, b) => b.at.getTime() - a.at.getTime());
  }

  /** Who wrote a message, as people see it: the custom username Herald posted under, else the author's display name. */
  private async nickOf(m: SlackMessage): Promise<string> {
    if (m.username !== undefined && m.username !== '') return m.username;
    if (m.user !== undefined) return this.displayName(m.user);
    return m.bot_profile?.name ?? m.bot_id ?? 'unknown';
  }

  private async displayName(userId: string): Promise<string> {
    const cached = this.users.get(userId);
    if (cached !== undefined && Date.now() - cached.at < USERS_TTL_MS) return cached.name;
    let name = userId;
    try {
      const { user } = await this.call<UsersInfoResponse>('users.info', { user: userId });
      name = user?.profile?.display_name || user?.profile?.real_name || user?.real_name || user?.name || userId;
    } catch (err) {
      // A user Slack no longer knows is shown by id; anything else is the caller's failure.
      if (!(err instanceof TransportError && err.failure.kind === 'not_found')) throw err;
    }
    this.users.set(userId, { at: Date.now(), name });
    return name;
  }

  /** Create the channel; one that exists already (`name_taken`) is joined instead. */
  async createChannel(name: string): Promise<string> {
    const bare = name.replace(/^#/, '').toLowerCase();
    try {
      const created = await this.call<ConversationsCreateResponse>('conversations.create', { name: bare });
      this.channelList = undefined;
      return created.channel?.name ?? bare;
    } catch (err) {
      if (!isSlackCode(err, 'name_taken')) {
        if (err instanceof TransportError && err.failure.kind === 'rejected') {
          throw new TransportError({ kind: 'rejected', detail: `Slack refused to create the channel (the app needs channels:manage): ${err.failure.detail}` });
        }
        throw err;
      }
    }
    this.channelList = undefined;
    const id = await this.channelId(bare);
    try {
      await this.call('conversations.join', { channel: id });
    } catch (err) {
      // A private channel of that name cannot be joined; it exists all the same.
      if (!(err instanceof TransportError && err.failure.kind !== 'transient')) throw err;
      this.o.log.info({ err: errorSummary(err) }, 'the Slack channel exists but the bot could not join it');
    }
    return bare;
  }

  async listChannels(): Promise<string[]> {
    return [...(await this.refreshChannels()).keys()].sort();
  }

  async members(channel: string): Promise<string[]> {
    const channelId = await this.channelId(channel);
    const self = await this.o.selfId();
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.call<ConversationsMembersResponse>('conversations.members', { channel: channelId, limit: 200, ...(cursor ? { cursor } : {}) });
      ids.push(...(page.members ?? []));
      cursor = page.response_metadata?.next_cursor || undefined;
    } while (cursor !== undefined);
    const names: string[] = [];
    for (const id of ids) if (id !== self) names.push(await this.displayName(id));
    return names.sort((a, b) => a.localeCompare(b));
  }
}

/** A time as a Slack ts ("seconds.micros"). */
export function tsOf(at: Date): string {
  const ms = at.getTime();
  return `${Math.floor(ms / 1000)}.${String(ms % 1000).padStart(3, '0')}000`;
}

/** When a Slack ts was created. */
export function dateOf(ts: string): Date {
  return new Date(Math.floor(Number(ts) * 1000));
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
