import type { WebAPICallResult } from '@slack/web-api';
import { SlackApi, slackErrorCode, type Pace } from './slack-client.js';
import { outsideFences } from '../../infra/faults/fence.js';
import { edited, rendered, type Block } from './slack-render.js';
import { TransportError, type ChannelInfo, type Channels, type Deleter, type DirectMessages, type Editor, type Reactions, type KeyedFind, type KeyedHistory, type MemberInfo, type Members, type Mentions, type OutgoingMessage, type SendDeadline, type Sender, type SentMessage, type Threading, type Platform } from '../platform.js';

/** The metadata event type Herald marks its sends with (the send key is its payload's `id`). */
export const DELIVERY_EVENT = 'herald_delivery';
/** Messages per conversations.history page while looking for a key. */
const HISTORY_PAGE = 200;
/** At most this many pages are read for one key: past that, the answer is undecided, never a guess. */
const MAX_HISTORY_PAGES = 50;

/** What auth.test says about the token: whose it is, and the workspace's url. */
export interface SlackIdentity {
  /** The bot's user id (U…): the author of what Herald sends. */
  userId: string;
  /** The bot's id (B…). */
  botId: string | undefined;
  teamId: string;
  /** https://<domain>.slack.com/ (with a trailing slash). */
  url: string;
}

export interface SlackTransportOptions {
  token: string;
  apiUrl: string;
  timeoutMs: number;
  pace?: Pace;
}

/** A message as conversations.history lists it, the fields Herald reads. */
interface HistoryMessage {
  ts?: string;
  user?: string;
  bot_id?: string;
  text?: string;
  blocks?: Block[];
  metadata?: { event_type?: string; event_payload?: Record<string, unknown> };
}

/**
 * Slack over its Web API, so any number of workers can send: posts and DMs marked with the send's
 * key in their metadata (Slack has no idempotency key, so a create in doubt is proven by finding
 * that key in the channel's history), edits, channels and members. Slash commands and messages
 * others write come over Socket Mode (slack-socket.ts).
 */
export class SlackPlatform implements Platform {
  readonly name = 'slack' as const;
  readonly title = 'Slack';
  readonly idempotentSend = false;
  readonly sender: Sender = { send: (channelId, message, key, signal, mentions, deadline) => this.post(channelId, message, key, signal, mentions, deadline) };
  readonly dms: DirectMessages = { openDm: (userId, signal) => this.openDm(userId, signal) };
  readonly editor: Editor = { edit: (channelId, ts, message, signal) => this.update(channelId, ts, message, signal) };
  readonly reactions: Reactions = {
    add: (channelId, ts, emoji, signal) => this.react('reactions.add', channelId, ts, emoji, signal),
    remove: (channelId, ts, emoji, signal) => this.react('reactions.remove', channelId, ts, emoji, signal),
  };
  readonly deleter: Deleter = { delete: (channelId, ts, signal) => this.deleteMessage(channelId, ts, signal) };
  /** Replies and threads are one thing on Slack: a message in the thread of a `ts` (chat.postMessage's `thread_ts`). */
  readonly threading: Threading = { replies: true, threads: true, inThread: (channelId, threadTs) => Promise.resolve({ channelId, replyTo: threadTs }) };
  readonly keyed: KeyedHistory = { findByKey: (channelId, key, from, until, signal, thread) => this.findByKey(channelId, key, from, until, signal, thread) };
  readonly channels: Channels = { getChannel: (channelId) => this.getChannel(channelId), check: slackChannelIdProblem };
  readonly members: Members = { listMembers: (channelId) => this.listMembers(channelId) };
  readonly api: SlackApi;
  private self: Promise<SlackIdentity> | undefined;
  /** The workspace url, once auth.test answered (permalinks are built from it without a call). */
  private workspaceUrl: string | undefined;

  constructor(options: SlackTransportOptions) {
    this.api = new SlackApi({ token: options.token, apiUrl: options.apiUrl, timeoutMs: options.timeoutMs, ...(options.pace !== undefined ? { pace: options.pace } : {}) });
  }

  /** Where people open a message: `<workspace url>archives/<channel>/p<ts without the dot>`. */
  messageUrl(_scope: string, channelId: string, ts: string): string {
    return `${this.workspaceUrl ?? 'https://slack.com/'}archives/${channelId}/p${ts.replace('.', '')}`;
  }

  /**
   * Ask Slack whose token this is (auth.test). Slack's refusal (invalid_auth, not_authed,
   * token_revoked, …) is a TransportError of kind `rejected`; Slack not answering is transient.
   */
  identity(signal?: AbortSignal): Promise<SlackIdentity> {
    // Shared by every caller: asked under no job's fence (src/infra/faults/fence.ts).
    const asked = (this.self ??= outsideFences(() => this.api.call<WebAPICallResult & { user_id?: string; bot_id?: string; team_id?: string; url?: string }>('auth.test', {}, { signal })).then((r) => {
      const url = typeof r.url === 'string' && r.url !== '' ? (r.url.endsWith('/') ? r.url : `${r.url}/`) : 'https://slack.com/';
      this.workspaceUrl = url;
      return { userId: r.user_id ?? '', botId: r.bot_id, teamId: r.team_id ?? '', url };
    }));
    asked.catch(() => {
      if (this.self === asked) this.self = undefined;
    });
    return asked;
  }

  /** The bot's user id. */
  async selfId(): Promise<string> {
    return (await this.identity()).userId;
  }

  /** https://api.slack.com/methods/chat.postMessage, marked with the send's key. */
  private async post(channelId: string, message: OutgoingMessage, key: string, signal: AbortSignal, mentions?: Mentions, deadline?: SendDeadline): Promise<SentMessage> {
    // The workspace url (for the permalink) is known before anything is created, so a send costs one call.
    await this.identity(signal);
    const { text, blocks } = rendered(message, mentions);
    const create = () => this.api.call<WebAPICallResult & { channel?: string; ts?: string }>(
      'chat.postMessage',
      {
        channel: channelId,
        text,
        blocks,
        metadata: { event_type: DELIVERY_EVENT, event_payload: { id: key } },
        // A reply (or a post into a thread) goes into that message's thread.
        ...(message.replyTo !== undefined ? { thread_ts: message.replyTo } : {}),
        // Nothing in the text is turned into a mention or a link by Slack; Herald's own escaping
        // already made <!here>-style sequences inert, and only `mentions` are left as <@U…>.
        parse: 'none',
        link_names: false,
        unfurl_links: false,
        unfurl_media: false,
      },
      { signal, deadline },
    );
    let sent;
    try {
      sent = await create();
    } catch (err) {
      // not_in_channel is a refusal (nothing was created): a public channel the bot can join is
      // joined, as a person would, and the post made once more. Otherwise the refusal stands.
      if (slackErrorCode(err) !== 'not_in_channel' || !(await this.joined(channelId, signal))) throw err;
      sent = await create();
    }
    if (typeof sent.ts !== 'string') throw new TransportError({ kind: 'transient', detail: 'slack chat.postMessage answered without a ts', mayHaveCreated: true });
    return { channelId: sent.channel ?? channelId, messageId: sent.ts };
  }

  /** https://api.slack.com/methods/conversations.join: whether the bot is now in the channel. */
  private async joined(channelId: string, signal: AbortSignal): Promise<boolean> {
    try {
      await this.api.call('conversations.join', { channel: channelId }, { signal });
      return true;
    } catch (err) {
      // A private channel, an archived one, or no channels:join scope: the bot must be invited.
      if (err instanceof TransportError && err.failure.kind !== 'transient') return false;
      throw err;
    }
  }

  /** https://api.slack.com/methods/conversations.open */
  private async openDm(userId: string, signal: AbortSignal): Promise<string> {
    const opened = await this.api.call<WebAPICallResult & { channel?: { id?: string } }>('conversations.open', { users: userId }, { signal });
    const id = opened.channel?.id;
    if (typeof id !== 'string') throw new TransportError({ kind: 'transient', detail: 'slack conversations.open answered without a channel' });
    return id;
  }

  /** https://api.slack.com/methods/chat.update: the parts the edit includes replace those shown. */
  private async update(channelId: string, ts: string, message: OutgoingMessage, signal: AbortSignal): Promise<void> {
    const complete = message.content !== undefined && message.card !== undefined && message.links !== undefined;
    const current = complete ? undefined : await this.message(channelId, ts, signal);
    const { text, blocks } = edited(current?.blocks, message);
    await this.api.call('chat.update', { channel: channelId, ts, text, blocks, parse: 'none', link_names: false }, { signal });
  }

  /**
   * reactions.add / reactions.remove (https://docs.slack.dev/reference/methods/reactions.add): Slack
   * names an emoji by its name; `already_reacted` and `no_reaction` say it is already so (success).
   */
  private async react(method: 'reactions.add' | 'reactions.remove', channelId: string, ts: string, emoji: string, signal: AbortSignal): Promise<void> {
    try {
      await this.api.call(method, { channel: channelId, timestamp: ts, name: slackEmojiName(emoji) }, { signal });
    } catch (err) {
      const code = slackErrorCode(err);
      if (code === 'already_reacted' || code === 'no_reaction') return;
      throw err;
    }
  }

  /** chat.delete (https://docs.slack.dev/reference/methods/chat.delete): `message_not_found` is already done. */
  private async deleteMessage(channelId: string, ts: string, signal: AbortSignal): Promise<void> {
    try {
      await this.api.call('chat.delete', { channel: channelId, ts }, { signal });
    } catch (err) {
      if (slackErrorCode(err) === 'message_not_found') return;
      throw err;
    }
  }

  /** One message by its ts (conversations.history from ts to ts, inclusive). */
  private async message(channelId: string, ts: string, signal: AbortSignal): Promise<HistoryMessage | undefined> {
    const page = await this.api.call<WebAPICallResult & { messages?: HistoryMessage[] }>('conversations.history', { channel: channelId, oldest: ts, latest: ts, inclusive: true, limit: 1 }, { signal });
    const found = (page.messages ?? []).find((m) => m.ts === ts);
    if (found === undefined) throw new TransportError({ kind: 'not_found', detail: 'slack message_not_found on conversations.history' });
    return found;
  }

  /**
   * The message `key` created in the channel since `from` (the doubt window's start): conversations.history
   * with every message's metadata, read up to now (later than `until`, which the key makes safe). Slack refusing to show the channel is
   * undecided (Herald cannot tell); Slack not answering is a transient error (looked at again later).
   */
  private async findByKey(channelId: string, key: string, from: Date, _until: Date, signal: AbortSignal, thread?: string): Promise<KeyedFind> {
    let me: SlackIdentity;
    try {
      me = await this.identity(signal);
    } catch (err) {
      if (err instanceof TransportError && err.failure.kind !== 'transient') return { undecided: `slack refused auth.test (${err.failure.detail})` };
      throw err;
    }
    let cursor: string | undefined;
    for (let page = 0; page < MAX_HISTORY_PAGES; page++) {
      let answer: WebAPICallResult & { messages?: HistoryMessage[]; has_more?: boolean };
      try {
        // A reply lives in its thread: conversations.history lists only the thread's parent.
        answer = await this.api.call(thread !== undefined ? 'conversations.replies' : 'conversations.history', {
          channel: channelId,
          ...(thread !== undefined ? { ts: thread } : {}),
          // Up to now, not `until`: the key alone decides, so a create Slack finished late (or a
          // Slack clock ahead of Herald's) is still found rather than sent again.
          oldest: slackTs(from),
          inclusive: true,
          include_all_metadata: true,
          limit: HISTORY_PAGE,
          ...(cursor !== undefined ? { cursor } : {}),
        }, { signal });
      } catch (err) {
        if (err instanceof TransportError && err.failure.kind !== 'transient') return { undecided: `the channel's history cannot be read (${slackErrorCode(err) ?? err.failure.detail})` };
        throw err;
      }
      for (const m of answer.messages ?? []) {
        if (m.metadata?.event_type !== DELIVERY_EVENT || m.metadata.event_payload?.['id'] !== key || typeof m.ts !== 'string') continue;
        // Only Herald's own bot marks its messages so; another app copying the mark proves nothing.
        const mine = m.user === me.userId || (me.botId !== undefined && m.bot_id === me.botId);
        if (mine) return { found: { channelId, messageId: m.ts } };
      }
      cursor = answer.response_metadata?.next_cursor;
      if (answer.has_more !== true || cursor === undefined || cursor === '') return { absent: true };
    }
    return { undecided: `more than ${MAX_HISTORY_PAGES * HISTORY_PAGE} messages in the channel during the doubt window` };
  }

  /** https://api.slack.com/methods/conversations.info; undefined when Slack does not show it to the bot. */
  private async getChannel(channelId: string): Promise<ChannelInfo | undefined> {
    try {
      const { channel } = await this.api.call<WebAPICallResult & { channel?: { id?: string; name?: string; is_archived?: boolean; context_team_id?: string; is_im?: boolean; user?: string } }>('conversations.info', { channel: channelId });
      if (channel?.id === undefined) return undefined;
      // The workspace it belongs to: Slack names it on shared channels; otherwise it is the bot's own.
      const teamId = channel.context_team_id ?? (await this.identity().then((me) => me.teamId, () => undefined));
      return { id: channel.id, guildId: teamId, name: channel.name ?? channel.user, isText: channel.is_archived !== true };
    } catch (err) {
      if (err instanceof TransportError && err.failure.kind === 'not_found') return undefined;
      throw err;
    }
  }

  /** conversations.members (every page), then users.info for each member's name. */
  private async listMembers(channelId: string): Promise<MemberInfo[]> {
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.api.call<WebAPICallResult & { members?: string[] }>('conversations.members', { channel: channelId, limit: 200, ...(cursor !== undefined ? { cursor } : {}) });
      ids.push(...(page.members ?? []));
      cursor = page.response_metadata?.next_cursor;
    } while (cursor !== undefined && cursor !== '');
    const members: MemberInfo[] = [];
    for (const id of ids) {
      const { user } = await this.api.call<WebAPICallResult & { user?: { id?: string; name?: string; real_name?: string; is_bot?: boolean; profile?: { display_name?: string; real_name?: string } } }>('users.info', { user: id });
      const profile = user?.profile;
      const displayName = [profile?.display_name, profile?.real_name, user?.real_name, user?.name].find((n) => typeof n === 'string' && n !== '') ?? id;
      members.push({ userId: id, displayName, bot: user?.is_bot === true });
    }
    return members;
  }
}

/** Why `channel` cannot be a Slack conversation id (C…, G… or D…), or undefined when it can. */
export function slackChannelIdProblem(channel: string): string | undefined {
  return /^[CGD][A-Z0-9]{6,20}$/.test(channel) ? undefined : 'channel must be a Slack channel id (C…, G… or D…)';
}

/** A time as Slack's ts (seconds, six decimals). */
export function slackTs(at: Date): string {
  const ms = at.getTime();
  return `${Math.floor(ms / 1000)}.${String((ms % 1000) * 1000).padStart(6, '0')}`;
}

/** The unicode emoji Herald names for Slack (Slack takes names); anything else is passed as a name, colons trimmed. */
const SLACK_EMOJI_NAMES: Readonly<Record<string, string>> = {
  '👍': '+1',
  '👎': '-1',
  '✅': 'white_check_mark',
  '❌': 'x',
  '👀': 'eyes',
  '🎉': 'tada',
  '❤️': 'heart',
  '🔥': 'fire',
  '🚀': 'rocket',
  '⚠️': 'warning',
  '🙏': 'pray',
  '😄': 'smile',
};

/** An emoji as Slack names it: a known unicode one by its name, `:name:` or `name` as it is. */
export function slackEmojiName(emoji: string): string {
  return SLACK_EMOJI_NAMES[emoji] ?? emoji.replace(/^:(.*):$/, '$1');
}
