import type Router from '@koa/router';
import type { Context } from 'koa';
import { readJsonBody } from '../../../infra/http/body.js';
import { discordError } from './errors.js';
import type { Fault } from './faults.js';
import { mentionsOf, publicUser, type SandboxChannel, type SandboxMessage, type SandboxState, type SandboxUser } from './state.js';

/**
 * A message as Discord's REST API shows it (listed, created), and the routes on a message that
 * exists: reactions, deletes and threads started from it or beside it. Mounted by rest.ts.
 */

/** Start a public thread under a guild text channel (by id: a thread from a message has the message's id); undefined: not a text channel. */
export type StartThread = (parentId: string, name: string, id?: string) => SandboxChannel | undefined;

/** The users a message mentions (and so notifies), as Discord shows them. */
export function mentionedUsers(state: SandboxState, m: SandboxMessage): { id: string }[] {
  return mentionsOf(m).users.map((id) => {
    const u = state.users.get(id);
    return u !== undefined ? { ...publicUser(u), id } : { id, username: 'unknown', global_name: null, discriminator: '0', avatar: null };
  });
}

/** A message as Discord lists it (GET) and answers an edit. */
export function listedMessage(m: SandboxMessage): Record<string, unknown> {
  return {
    id: m.id,
    channel_id: m.channel_id,
    author: publicUser(m.author),
    content: m.content,
    embeds: m.embeds,
    components: m.components,
    timestamp: m.timestamp,
    edited_timestamp: m.edited_timestamp,
    type: m.type,
    tts: false,
    mention_everyone: mentionsOf(m).everyone,
    mentions: mentionsOf(m).users.map((id) => ({ id, username: 'user', global_name: null, discriminator: '0', avatar: null })),
    mention_roles: [],
    attachments: m.attachments ?? [],
    pinned: false,
    ...(m.message_reference !== undefined ? { message_reference: m.message_reference } : {}),
    ...(m.reactions !== undefined && m.reactions.length > 0 ? { reactions: m.reactions.map((r) => ({ count: r.users.length, me: r.users.includes(HERALD_BOT_ID), emoji: emojiObject(r.emoji) })) } : {}),
  };
}

/** The sandbox's Herald bot (SandboxState.bot): `me` in a listed reaction is whether it reacted. */
const HERALD_BOT_ID = '111111111111111111';

/** A reaction's emoji as Discord shows it: a unicode one by name, a custom one by name and id. */
function emojiObject(emoji: string): { id: string | null; name: string } {
  const custom = /^([A-Za-z0-9_]{2,32}):([0-9]{5,25})$/.exec(emoji);
  return custom !== null ? { id: custom[2] ?? null, name: custom[1] ?? '' } : { id: null, name: emoji };
}

/** A custom emoji `name:id`, or a unicode one (no ASCII letters, digits or spaces): what Discord takes; else 10014 Unknown Emoji. */
function validEmoji(emoji: string): boolean {
  if (/^[A-Za-z0-9_]{2,32}:[0-9]{5,25}$/.test(emoji)) return true;
  return emoji.length > 0 && emoji.length <= 32 && !/[\sA-Za-z0-9:]/.test(emoji);
}

/**
 * Reactions (https://discord.com/developers/docs/resources/message#create-reaction, #delete-own-reaction)
 * and deletes (#delete-message), with Discord's answers: 204 on success (a reaction already there
 * or already gone included), 10003 Unknown Channel, 10008 Unknown Message, 10014 Unknown Emoji,
 * 50013 Missing Permissions for another's message. A `drop_after_create` fault drops the answer
 * after the change is made (the lost answer a retry must survive).
 */
export function messageOpRoutes(api: Router, state: SandboxState, botOf: (ctx: Context) => SandboxUser): void {
  const answered = async (ctx: Context): Promise<void> => {
    state.save();
    const fault = ctx.state['fault'] as Fault | undefined;
    if (fault?.action === 'delay_after_create') await sleep(fault.ms ?? 1_000);
    if (fault?.action === 'drop_after_create') {
      ctx.respond = false;
      ctx.req.socket.destroy();
      return undefined;
    }
    if (fault?.action === 'error_after_create') return discordError(ctx, fault.status ?? 500, fault.code ?? 0, 'Internal Server Error');
    ctx.status = 204;
    return undefined;
  };
  const located = (ctx: Context): SandboxMessage | undefined => {
    const channelId = ctx.params['id'] ?? '';
    if (!state.channels.has(channelId)) {
      discordError(ctx, 404, 10003, 'Unknown Channel');
      return undefined;
    }
    const message = state.findMessage(channelId, ctx.params['messageId'] ?? '');
    if (message === undefined) discordError(ctx, 404, 10008, 'Unknown Message');
    return message;
  };
  const reaction = async (ctx: Context, add: boolean): Promise<void> => {
    const message = located(ctx);
    if (message === undefined) return undefined;
    const raw = ctx.params['emoji'] ?? '';
    let emoji: string;
    try {
      emoji = decodeURIComponent(raw);
    } catch {
      return discordError(ctx, 400, 10014, 'Unknown Emoji');
    }
    if (!validEmoji(emoji)) return discordError(ctx, 400, 10014, 'Unknown Emoji');
    const me = botOf(ctx).id;
    const reactions = (message.reactions ??= []);
    const found = reactions.find((r) => r.emoji === emoji);
    if (add) {
      if (found === undefined) reactions.push({ emoji, users: [me] });
      else if (!found.users.includes(me)) found.users.push(me);
    } else if (found !== undefined) {
      found.users = found.users.filter((u) => u !== me);
      if (found.users.length === 0) reactions.splice(reactions.indexOf(found), 1);
    }
    return await answered(ctx);
  };
  api.put('/channels/:id/messages/:messageId/reactions/:emoji/@me', (ctx) => reaction(ctx, true));
  api.delete('/channels/:id/messages/:messageId/reactions/:emoji/@me', (ctx) => reaction(ctx, false));
  api.delete('/channels/:id/messages/:messageId', async (ctx) => {
    const message = located(ctx);
    if (message === undefined) return undefined;
    const me = botOf(ctx).id;
    if (message.author.id !== me) return discordError(ctx, 403, 50013, 'Missing Permissions');
    state.deleteMessage(message.channel_id, message.id, me);
    return await answered(ctx);
  });
}

/** A message as Discord answers its creation (and reports it to the gateway): with its nonce. */
export function createdMessage(m: SandboxMessage): Record<string, unknown> {
  return { ...listedMessage(m), ...(m.nonce !== undefined ? { nonce: m.nonce } : {}) };
}

/** Wait this long (a `delay` fault). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Starting a public thread (type 11, with its parent_id), as Discord answers it:
 * https://discord.com/developers/docs/resources/channel#start-thread-from-message (the thread's id
 * is the message's) and #start-thread-without-message.
 */
export function threadRoutes(api: Router, state: SandboxState, startThread: StartThread): void {
  const start = async (ctx: Context, messageId: string | undefined): Promise<void> => {
    const channelId = ctx.params['id'] ?? '';
    if (!state.channels.has(channelId)) return discordError(ctx, 404, 10003, 'Unknown Channel');
    if (messageId !== undefined && state.findMessage(channelId, messageId) === undefined) return discordError(ctx, 404, 10008, 'Unknown Message');
    if (messageId !== undefined && state.channels.has(messageId)) return discordError(ctx, 400, 160004, 'A thread has already been created for this message');
    const parsed = await readJsonBody(ctx.req);
    const name = parsed.ok ? (parsed.value as { name?: unknown }).name : undefined;
    if (typeof name !== 'string' || name.length < 1 || name.length > 100) return discordError(ctx, 400, 50035, 'Invalid Form Body: name must be 1..100 characters');
    const thread = startThread(channelId, name, messageId);
    if (thread === undefined) return discordError(ctx, 400, 50024, 'Cannot execute action on this channel type');
    ctx.status = 201;
    ctx.body = { id: thread.id, type: thread.type, guild_id: thread.guild_id, parent_id: thread.parent_id, name: thread.name, owner_id: state.bot.id, message_count: 0, member_count: 1, thread_metadata: { archived: false, auto_archive_duration: 1440, archive_timestamp: new Date().toISOString(), locked: false } };
    return undefined;
  };
  api.post('/channels/:id/messages/:messageId/threads', (ctx) => start(ctx, ctx.params['messageId']));
  api.post('/channels/:id/threads', (ctx) => start(ctx, undefined));
}
