import { parseTs, type SlackConversation, type SlackMessage, type SlackWorkspace } from './state.js';
import { conversationObject, messageObject, SlackApiError, userObject, type ApiCall, type Handler, type Params } from './web-api.js';

/**
 * The workspace methods: auth.test, users.info, and the conversations.* methods Herald uses
 * (history with cursor paging and metadata on request, replies, list, create, join, members,
 * info, open). Conversations the bot may not see answer channel_not_found, as on Slack.
 * https://docs.slack.dev/reference/methods/conversations.history
 */

export interface WorkspaceMethodOptions {
  workspace: SlackWorkspace;
  /** The workspace URL with a trailing slash (http://host:port/). */
  workspaceUrl: () => string;
}

const CHANNEL_NAME = /^[a-z0-9_-]+$/;

export function workspaceMethods({ workspace, workspaceUrl }: WorkspaceMethodOptions): Record<string, Handler> {
  const team = workspace.ids.team;
  /** A conversation the caller can see: public channels, and the others it is a member of. */
  const visible = (params: Params, caller: string): SlackConversation => {
    const conversation = workspace.find(params.need('channel', 'channel_not_found'));
    if (conversation === undefined || (conversation.kind !== 'public' && !conversation.members.includes(caller))) throw new SlackApiError('channel_not_found');
    return conversation;
  };
  /** A conversation the caller reads messages of: it must be a member. */
  const readable = (params: Params, caller: string): SlackConversation => {
    const conversation = visible(params, caller);
    if (!conversation.members.includes(caller)) throw new SlackApiError('not_in_channel');
    return conversation;
  };
  return {
    'auth.test': ({ caller }: ApiCall) => ({
      url: workspaceUrl(),
      team: 'Herald Sandbox',
      user: caller.name,
      team_id: team,
      user_id: caller.id,
      ...(caller.bot_id === undefined ? {} : { bot_id: caller.bot_id }),
      is_enterprise_install: false,
    }),
    'users.info': ({ params }: ApiCall) => {
      const user = workspace.users.get(params.need('user', 'user_not_found'));
      if (user === undefined) throw new SlackApiError('user_not_found');
      return { user: userObject(user, team) };
    },
    'conversations.history': ({ params, caller }: ApiCall) => {
      const conversation = readable(params, caller.id);
      const all = workspace.messages.get(conversation.id) ?? [];
      // Thread replies stay in their thread (conversations.replies); the channel shows their parents.
      const top = all.filter((m) => m.thread_ts === undefined || m.thread_ts === m.ts);
      const { oldest, latest, inclusive } = bounds(params);
      const upper = cursorTs(params) ?? latest;
      const fromCursor = params.has('cursor');
      const inRange = top.filter((m) => {
        const ts = parseTs(m.ts) ?? 0n;
        const aboveOldest = inclusive ? ts >= oldest : ts > oldest;
        const belowLatest = upper === undefined || (inclusive && !fromCursor ? ts <= upper : ts < upper);
        return aboveOldest && belowLatest;
      });
      const newestFirst = inRange.reverse();
      const limit = clampLimit(params, 100, 999);
      const page = newestFirst.slice(0, limit);
      const hasMore = newestFirst.length > limit;
      const last = page[page.length - 1];
      const withMetadata = params.bool('include_all_metadata');
      return {
        messages: page.map((m) => ({ ...messageObject(m, team, withMetadata), ...threadSummary(m, all) })),
        has_more: hasMore,
        pin_count: 0,
        channel_actions_ts: null,
        channel_actions_count: 0,
        response_metadata: { next_cursor: hasMore && last !== undefined ? encodeCursor(`next_ts:${last.ts}`) : '' },
      };
    },
    'conversations.replies': ({ params, caller }: ApiCall) => {
      const conversation = readable(params, caller.id);
      const all = workspace.messages.get(conversation.id) ?? [];
      const parent = all.find((m) => m.ts === params.str('ts'));
      if (parent === undefined) throw new SlackApiError('thread_not_found');
      const thread = all.filter((m) => m.ts === parent.ts || m.thread_ts === parent.ts);
      const after = cursorTs(params);
      const rest = after === undefined ? thread : thread.filter((m) => (parseTs(m.ts) ?? 0n) > after);
      const limit = clampLimit(params, 1000, 1000);
      const page = rest.slice(0, limit);
      const last = page[page.length - 1];
      const withMetadata = params.bool('include_all_metadata');
      return {
        messages: page.map((m) => ({ ...messageObject(m, team, withMetadata), ...threadSummary(m, all) })),
        has_more: rest.length > limit,
        response_metadata: { next_cursor: rest.length > limit && last !== undefined ? encodeCursor(`next_ts:${last.ts}`) : '' },
      };
    },
    'conversations.list': ({ params, caller }: ApiCall) => {
      const types = (params.str('types') ?? 'public_channel').split(',').map((t) => t.trim());
      const kinds = new Set(types.map((t) => ({ public_channel: 'public', private_channel: 'private', im: 'im', mpim: 'mpim' })[t]));
      const listed = [...workspace.conversations.values()].filter((c) => kinds.has(c.kind) && (c.kind === 'public' || c.members.includes(caller.id)));
      const { page, nextCursor } = offsetPage(params, listed, 100, 1000);
      return { channels: page.map((c) => conversationObject(c, caller.id)), response_metadata: { next_cursor: nextCursor } };
    },
    'conversations.create': ({ params, caller }: ApiCall) => {
      const name = params.str('name') ?? '';
      if (name === '') throw new SlackApiError('invalid_name_required');
      if ([...name].length > 80) throw new SlackApiError('invalid_name_maxlength');
      if (!CHANNEL_NAME.test(name)) throw new SlackApiError('invalid_name_specials');
      if (workspace.find(name) !== undefined) throw new SlackApiError('name_taken');
      const conversation = workspace.add({ id: workspace.newId('C'), name, kind: params.bool('is_private') ? 'private' : 'public', created: workspace.seconds(), creator: caller.id, members: [caller.id] });
      workspace.save();
      return { channel: conversationObject(conversation, caller.id) };
    },
    'conversations.join': ({ params, caller }: ApiCall) => {
      const conversation = visible(params, caller.id);
      if (conversation.kind !== 'public') throw new SlackApiError('method_not_supported_for_channel_type');
      const already = conversation.members.includes(caller.id);
      if (!already) {
        conversation.members.push(caller.id);
        workspace.save();
      }
      const channel = conversationObject(conversation, caller.id);
      return already ? { channel, warning: 'already_in_channel', response_metadata: { warnings: ['already_in_channel'] } } : { channel };
    },
    'conversations.members': ({ params, caller }: ApiCall) => {
      const conversation = visible(params, caller.id);
      const { page, nextCursor } = offsetPage(params, conversation.members, 100, 1000);
      return { members: page, response_metadata: { next_cursor: nextCursor } };
    },
    'conversations.info': ({ params, caller }: ApiCall) => ({ channel: conversationObject(visible(params, caller.id), caller.id) }),
    'conversations.open': ({ params, caller }: ApiCall) => {
      const users = (params.str('users') ?? '').split(',').map((u) => u.trim()).filter((u) => u !== '');
      if (users.length === 0) throw new SlackApiError('users_list_not_supplied');
      if (users.some((u) => !workspace.users.has(u))) throw new SlackApiError('user_not_found');
      const before = workspace.conversations.size;
      const dm = workspace.openDm(users);
      if (workspace.conversations.size !== before) workspace.save();
      const alreadyOpen = workspace.conversations.size === before;
      return {
        channel: params.bool('return_im') ? conversationObject(dm, caller.id) : { id: dm.id },
        ...(alreadyOpen ? { no_op: true, already_open: true } : {}),
      };
    },
  };
}

/** A thread parent's summary (reply_count, latest_reply…), as history lists it. */
function threadSummary(m: SlackMessage, all: SlackMessage[]): Record<string, unknown> {
  const replies = all.filter((r) => r.thread_ts === m.ts && r.ts !== m.ts);
  const latest = replies[replies.length - 1];
  if (latest === undefined) return {};
  return { thread_ts: m.ts, reply_count: replies.length, reply_users: [...new Set(replies.map((r) => r.user))], latest_reply: latest.ts };
}

/** oldest (default 0), latest (default none) and inclusive, read as ts. */
function bounds(params: Params): { oldest: bigint; latest: bigint | undefined; inclusive: boolean } {
  const read = (name: string): bigint | undefined => {
    const value = params.str(name);
    if (value === undefined || value === '') return undefined;
    const ts = parseTs(value);
    if (ts === undefined) throw new SlackApiError('invalid_ts_' + name);
    return ts;
  };
  return { oldest: read('oldest') ?? 0n, latest: read('latest'), inclusive: params.bool('inclusive') };
}

function clampLimit(params: Params, fallback: number, max: number): number {
  return Math.min(max, Math.max(1, params.int('limit', fallback)));
}

function encodeCursor(text: string): string {
  return Buffer.from(text).toString('base64');
}

/** The ts a `next_ts:` cursor continues from; `invalid_cursor` when it is not one. */
function cursorTs(params: Params): bigint | undefined {
  const cursor = params.str('cursor');
  if (cursor === undefined || cursor === '') return undefined;
  const m = /^next_ts:(.+)$/.exec(Buffer.from(cursor, 'base64').toString('utf8'));
  const ts = m?.[1] === undefined ? undefined : parseTs(m[1]);
  if (ts === undefined) throw new SlackApiError('invalid_cursor');
  return ts;
}

/** A page of a list by offset cursor (`offset:<n>`). */
function offsetPage<T>(params: Params, list: T[], fallback: number, max: number): { page: T[]; nextCursor: string } {
  const cursor = params.str('cursor');
  let offset = 0;
  if (cursor !== undefined && cursor !== '') {
    const m = /^offset:(\d+)$/.exec(Buffer.from(cursor, 'base64').toString('utf8'));
    if (m === null) throw new SlackApiError('invalid_cursor');
    offset = Number(m[1]);
  }
  const limit = clampLimit(params, fallback, max);
  const page = list.slice(offset, offset + limit);
  return { page, nextCursor: offset + limit < list.length ? encodeCursor(`offset:${offset + limit}`) : '' };
}
