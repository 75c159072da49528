import type { FaultQueue } from './limits.js';
import type { SlackConversation, SlackMessage, SlackMetadata, SlackWorkspace } from './state.js';
import { messageObject, SlackApiError, type ApiCall, type Handler, type Params } from './web-api.js';

/**
 * chat.postMessage, chat.update and chat.getPermalink, with Slack's checks: the channel exists and
 * the bot is in it, there is text and it is at most 40,000 characters, the message to update is
 * the bot's own. A post is kept with its metadata and reaches the connected app as a message
 * event, as Slack sends an app the messages of the channels it is in, its own included.
 * https://docs.slack.dev/reference/methods/chat.postMessage
 */

export const MAX_TEXT = 40_000;

export interface ChatOptions {
  workspace: SlackWorkspace;
  faults: FaultQueue;
  /** The workspace URL with a trailing slash (http://host:port/). */
  workspaceUrl: () => string;
  /** A new message in a conversation, to be sent to the app over Socket Mode. */
  posted: (conversation: SlackConversation, message: SlackMessage) => void;
}

export function chatMethods({ workspace, faults, workspaceUrl, posted }: ChatOptions): Record<string, Handler> {
  const team = workspace.ids.team;
  return {
    'chat.postMessage': ({ params, caller, ctx }: ApiCall) => {
      const channel = params.need('channel', 'channel_not_found');
      // A user id as the channel posts in the DM with that user, as on Slack.
      const conversation = workspace.find(channel) ?? (workspace.users.has(channel) ? workspace.openDm([channel]) : undefined);
      if (conversation === undefined) throw new SlackApiError('channel_not_found');
      if (!conversation.members.includes(caller.id)) throw new SlackApiError('not_in_channel');
      const text = checkedText(params);
      const metadata = metadataOf(params);
      const threadTs = params.str('thread_ts');
      // Slack has no error for a thread_ts that names no message; here such a post is an ordinary one.
      const parent = threadTs === undefined || threadTs === '' ? undefined : workspace.message(conversation.id, threadTs);
      const username = params.str('username');
      const iconUrl = params.str('icon_url');
      const message: SlackMessage = {
        ts: workspace.nextTs(),
        user: caller.id,
        text,
        ...(caller.bot_id === undefined ? {} : { bot_id: caller.bot_id }),
        ...(username === undefined || username === '' ? {} : { username }),
        ...(iconUrl === undefined || iconUrl === '' ? {} : { icon_url: iconUrl }),
        ...(parent === undefined ? {} : { thread_ts: parent.thread_ts ?? parent.ts }),
        ...(metadata === undefined ? {} : { metadata }),
      };
      workspace.append(conversation.id, message);
      posted(conversation, message);
      if (faults.takeDrop()) {
        // The message exists; the client never learns it: the connection ends unanswered.
        ctx.respond = false;
        ctx.req.socket.destroy();
        return undefined;
      }
      return { channel: conversation.id, ts: message.ts, message: messageObject(message, team, true) };
    },
    'chat.update': ({ params, caller }: ApiCall) => {
      const conversation = workspace.find(params.need('channel', 'channel_not_found'));
      if (conversation === undefined) throw new SlackApiError('channel_not_found');
      const message = workspace.message(conversation.id, params.need('ts', 'message_not_found'));
      if (message === undefined) throw new SlackApiError('message_not_found');
      if (message.user !== caller.id) throw new SlackApiError('cant_update_message');
      const text = checkedText(params);
      const metadata = metadataOf(params);
      message.text = text;
      if (metadata !== undefined) message.metadata = metadata;
      message.edited = { user: caller.id, ts: workspace.nextTs() };
      workspace.save();
      return { channel: conversation.id, ts: message.ts, text, message: messageObject(message, team, true) };
    },
    ...messageOpMethods(workspace, faults),
    'chat.getPermalink': ({ params }: ApiCall) => {
      const conversation = workspace.find(params.need('channel', 'channel_not_found'));
      if (conversation === undefined) throw new SlackApiError('channel_not_found');
      const message = workspace.message(conversation.id, params.need('message_ts', 'message_not_found'));
      if (message === undefined) throw new SlackApiError('message_not_found');
      return { channel: conversation.id, permalink: permalink(workspaceUrl(), conversation.id, message) };
    },
  };
}

/** A message's link: `<workspace url>archives/<channel>/p<ts without the dot>`, a reply's with its thread. */
export function permalink(workspaceUrl: string, channel: string, message: SlackMessage): string {
  const link = `${workspaceUrl}archives/${channel}/p${message.ts.replace('.', '')}`;
  return message.thread_ts === undefined || message.thread_ts === message.ts ? link : `${link}?thread_ts=${message.thread_ts}&cid=${channel}`;
}

/** The text of a post or edit: required unless blocks or attachments carry the message, at most MAX_TEXT characters. */
function checkedText(params: Params): string {
  const text = params.str('text') ?? '';
  if (text === '' && !params.has('blocks') && !params.has('attachments')) throw new SlackApiError('no_text');
  if ([...text].length > MAX_TEXT) throw new SlackApiError('msg_too_long');
  return text;
}

/** Message metadata: `{"event_type": "…", "event_payload": {…}}`; not a JSON object: invalid_metadata_format; not that shape: invalid_metadata_schema. */
function metadataOf(params: Params): SlackMetadata | undefined {
  const value = params.object('metadata', 'invalid_metadata_format');
  if (value === undefined) return undefined;
  const { event_type: type, event_payload: payload } = value;
  if (typeof type !== 'string' || !/^[a-z0-9_]{1,255}$/.test(type) || typeof payload !== 'object' || payload === null || Array.isArray(payload)) throw new SlackApiError('invalid_metadata_schema');
  return { event_type: type, event_payload: payload as Record<string, unknown> };
}

/** A reaction's name, as Slack checks it: lowercase letters, digits and `_+-'`, at most 100. */
const EMOJI_NAME = /^[a-z0-9_+\-']{1,100}$/;

/**
 * reactions.add, reactions.remove and chat.delete, with Slack's errors: `channel_not_found`,
 * `message_not_found`, `invalid_name`, `already_reacted` (adding one already there), `no_reaction`
 * (removing one not there), `cant_delete_message` (another's message).
 * https://docs.slack.dev/reference/methods/reactions.add, …/reactions.remove, …/chat.delete
 */
function messageOpMethods(workspace: SlackWorkspace, faults: FaultQueue): Record<string, Handler> {
  /** The answer, unless a fault drops it (the change is made either way). */
  const answer = (method: string, ctx: ApiCall['ctx'], result: Record<string, unknown>): Record<string, unknown> | undefined => {
    if (!faults.takeActDrop(method)) return result;
    ctx.respond = false;
    ctx.req.socket.destroy();
    return undefined;
  };
  const located = (params: Params, tsName: string): { conversation: SlackConversation; message: SlackMessage } => {
    const conversation = workspace.find(params.need('channel', 'channel_not_found'));
    if (conversation === undefined) throw new SlackApiError('channel_not_found');
    const message = workspace.message(conversation.id, params.need(tsName, 'message_not_found'));
    if (message === undefined) throw new SlackApiError('message_not_found');
    return { conversation, message };
  };
  const react = (params: Params, caller: { id: string }, add: boolean): Record<string, unknown> => {
    const { message } = located(params, 'timestamp');
    const name = params.need('name', 'invalid_name');
    if (!EMOJI_NAME.test(name)) throw new SlackApiError('invalid_name');
    const reactions = (message.reactions ??= []);
    const found = reactions.find((r) => r.name === name);
    if (add) {
      if (found?.users.includes(caller.id) === true) throw new SlackApiError('already_reacted');
      if (found === undefined) reactions.push({ name, users: [caller.id], count: 1 });
      else found.users.push(caller.id);
    } else {
      if (found === undefined || !found.users.includes(caller.id)) throw new SlackApiError('no_reaction');
      found.users = found.users.filter((u) => u !== caller.id);
      if (found.users.length === 0) reactions.splice(reactions.indexOf(found), 1);
    }
    for (const r of reactions) r.count = r.users.length;
    workspace.save();
    return {};
  };
  return {
    'reactions.add': ({ params, caller, ctx }: ApiCall) => answer('reactions.add', ctx, react(params, caller, true)),
    'reactions.remove': ({ params, caller, ctx }: ApiCall) => answer('reactions.remove', ctx, react(params, caller, false)),
    'chat.delete': ({ params, caller, ctx }: ApiCall) => {
      const { conversation, message } = located(params, 'ts');
      if (message.user !== caller.id) throw new SlackApiError('cant_delete_message');
      workspace.remove(conversation.id, message.ts);
      return answer('chat.delete', ctx, { channel: conversation.id, ts: message.ts });
    },
  };
}
