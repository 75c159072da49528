import Router from '@koa/router';
import type { Context } from 'koa';
import { readJsonBody } from '../../../infra/http/body.js';
import { attach, AttachmentStore, DISCORD_UPLOAD_LIMITS, readCreateBody, type UploadLimits } from './attachments.js';
import { discordError } from './errors.js';
import type { InteractionReply } from './control.js';
import type { Fault, Faults, RateLimits } from './faults.js';
import { guildChannelRoutes } from './guild-channels.js';
import { guildMemberRoutes, type GuildMembers } from './guild-members.js';
import type { MediaHistory } from './media-history.js';
import { createdMessage, listedMessage, mentionedUsers, messageOpRoutes, sleep, threadRoutes, type StartThread } from './message-routes.js';
import { publicUser, THREAD_TYPE, type RegisteredCommand, type SandboxMessage, type SandboxState, type SandboxUser } from './state.js';

/**
 * The slice of Discord's REST API (/api/v10) Herald uses: the bot user and application, command
 * registration, interaction callbacks, channels, DM channels, and messages (created with nonce
 * enforcement, listed, edited; reactions, deletes and threads in message-routes.ts). Every request
 * is authorized by the bot token (interaction callbacks by the interaction's token), logged, and
 * subject to injected faults and rate limits.
 * https://discord.com/developers/docs/reference
 */

/** One REST request received: method, path after /api/v10, status answered (and a 429's scope). */
export interface RequestLogEntry {
  method: string;
  path: string;
  status: number;
  scope?: string;
  /** When it arrived (ms since the epoch). */
  at: number;
}

export interface RestOptions {
  state: SandboxState;
  /** The bot a token belongs to: Herald's, or another bot the sandbox hosts. */
  botFor: (token: string) => SandboxUser | undefined;
  faults: Faults;
  rateLimits: RateLimits;
  /** Where every request received is appended. */
  requests: RequestLogEntry[];
  /** The sandbox's base URL (http://host:port). */
  url: () => string;
  /** MESSAGE_CREATE to every connected bot (content only to its author and the bots it mentions). */
  dispatchMessage: (data: { author: { id: string }; mentions: { id: string }[] } & Record<string, unknown>) => void;
  /** The callback answering a pending interaction, taken from the pending ones. */
  takeInteraction: (id: string) => ((reply: InteractionReply) => void) | undefined;
  /** Guild roles, members and owners. */
  people: GuildMembers;
  /** The generated media channel (read-only history). */
  media?: MediaHistory | undefined;
  /** Attachments' bytes, and Discord's limits for files (413 code 40005 past them). */
  files?: { store: AttachmentStore; limits: UploadLimits };
  /** Start a public thread (message-routes.ts). */
  startThread?: StartThread;
}

export function restRoutes({ state, botFor, faults, rateLimits, requests, url, dispatchMessage, takeInteraction, people, media, files, startThread }: RestOptions): Router {
  const uploads = files ?? { store: new AttachmentStore(undefined), limits: DISCORD_UPLOAD_LIMITS };
  const api = new Router({ prefix: '/api/v10' });
  /** The bot this request authenticated as (Herald's own for interaction callbacks). */
  const botOf = (ctx: Context): SandboxUser => (ctx.state['bot'] as SandboxUser | undefined) ?? state.bot;
  api.use(async (ctx, next) => {
    // Interaction callbacks are authorized by the interaction's token in the URL, not the bot token.
    const byInteractionToken = ctx.path.startsWith('/api/v10/interactions/');
    const authorization = ctx.get('authorization');
    const bot = authorization.startsWith('Bot ') ? botFor(authorization.slice(4)) : undefined;
    if (!byInteractionToken && bot === undefined) return discordError(ctx, 401, 0, '401: Unauthorized');
    ctx.state['bot'] = bot;
    const path = ctx.path.slice('/api/v10'.length);
    const seen: RequestLogEntry = { method: ctx.method, path, status: 0, at: Date.now() };
    requests.push(seen);
    try {
      const fault = faults.take(ctx.method, path);
      if (fault?.action === 'error') return discordError(ctx, fault.status ?? 500, fault.code ?? 0, 'Injected failure');
      if (fault?.action === 'delay') await sleep(fault.ms ?? 1_000);
      if (ctx.req.destroyed) {
        // The client gave up (a timeout) while the fault held its request.
        ctx.respond = false;
        return undefined;
      }
      // Interaction callbacks are not bound to a bot's limits (Discord's rate limits page), and are
      // made with no bot token: counting them against Herald's bot would let anyone use its budget.
      if (!byInteractionToken && !rateLimits.admit(ctx, path, botOf(ctx).id)) return undefined;
      ctx.state['fault'] = fault;
      return await next();
    } finally {
      seen.status = ctx.status;
      if (ctx.status === 429) seen.scope = ctx.response.get('X-RateLimit-Scope');
    }
  });
  // Another bot's DM channel is not this bot's to read or write, as on Discord.
  api.use(async (ctx, next) => {
    const id = /^\/api\/v10\/channels\/([0-9]+)/.exec(ctx.path)?.[1];
    const channel = id !== undefined ? state.channels.get(id) : undefined;
    const dmBot = channel !== undefined ? state.dmBotOf(channel) : undefined;
    if (dmBot !== undefined && dmBot !== botOf(ctx).id) return discordError(ctx, 403, 50001, 'Missing Access');
    return next();
  });
  api.get('/users/@me', (ctx) => {
    ctx.body = publicUser(botOf(ctx));
  });
  api.get('/gateway/bot', (ctx) => {
    ctx.body = {
      // Where the client reached the API (a proxy in front of the sandbox carries the gateway too).
      url: (ctx.host !== '' ? `${ctx.protocol}://${ctx.host}` : url()).replace(/^http/, 'ws') + '/gateway',
      shards: 1,
      session_start_limit: { total: 1000, remaining: 1000, reset_after: 0, max_concurrency: 1 },
    };
  });
  api.get('/applications/@me', (ctx) => {
    // As on Discord, a bot's application id is its user id.
    const bot = botOf(ctx);
    ctx.body = { id: bot.id, name: bot.global_name ?? bot.username, flags: 0, bot_public: false, bot_require_code_grant: false, verify_key: '', icon: null, description: '' };
  });
  api.put('/applications/:appId/commands', async (ctx) => {
    if (ctx.params['appId'] !== botOf(ctx).id) return discordError(ctx, 403, 50001, 'Missing Access');
    const body = await readJsonBody(ctx.req);
    if (!body.ok || !Array.isArray(body.value)) return discordError(ctx, 400, 50035, 'Invalid Form Body');
    // A bulk overwrite of this bot's application's commands (another bot's are kept apart: each bot gets its own interactions).
    const appId = botOf(ctx).id;
    const kept = appId === state.applicationId ? state.commands : (state.otherCommands.get(appId) ?? []);
    kept.length = 0;
    for (const c of body.value as Record<string, unknown>[]) {
      kept.push({ ...c, id: state.nextSnowflake(), application_id: appId, version: state.nextSnowflake(), type: 1 } as unknown as RegisteredCommand);
    }
    if (appId !== state.applicationId) state.otherCommands.set(appId, kept);
    ctx.body = kept;
    return undefined;
  });
  api.get('/applications/:appId/commands', (ctx) => {
    if (ctx.params['appId'] !== botOf(ctx).id) return discordError(ctx, 403, 50001, 'Missing Access');
    ctx.body = ctx.params['appId'] === state.applicationId ? state.commands : (state.otherCommands.get(ctx.params['appId'] ?? '') ?? []);
    return undefined;
  });
  api.post('/interactions/:id/:token/callback', async (ctx) => {
    const resolve = takeInteraction(ctx.params['id'] ?? '');
    if (resolve === undefined) return discordError(ctx, 400, 40060, 'Interaction has already been acknowledged.');
    const body = await readJsonBody(ctx.req);
    resolve(body.ok ? (body.value as InteractionReply) : { type: 0 });
    ctx.status = 204;
    return undefined;
  });
  api.get('/channels/:id', (ctx) => {
    if (media?.has(ctx.params['id'] ?? '') === true) {
      ctx.body = media.channel();
      return undefined;
    }
    const channel = state.channels.get(ctx.params['id'] ?? '');
    if (channel === undefined) return discordError(ctx, 404, 10003, 'Unknown Channel');
    ctx.body =
      channel.type === 1
        ? { id: channel.id, type: 1, recipients: channel.recipients?.map(publicUser) }
        : { id: channel.id, type: channel.type, name: channel.name, guild_id: channel.guild_id, position: 0, permission_overwrites: channel.permission_overwrites ?? [], ...(channel.type === THREAD_TYPE ? { parent_id: channel.parent_id ?? null } : {}) };
    return undefined;
  });
  guildMemberRoutes(api, state, people, listedMessage);
  guildChannelRoutes(api, state, people);
  api.post('/users/@me/channels', async (ctx) => {
    const body = await readJsonBody(ctx.req);
    const recipient = body.ok ? state.users.get(String((body.value as { recipient_id?: unknown }).recipient_id)) : undefined;
    if (recipient === undefined) return discordError(ctx, 400, 50035, 'Invalid Form Body');
    const channel = state.dmChannel(recipient, botOf(ctx).id);
    ctx.body = { id: channel.id, type: 1, recipients: [publicUser(recipient)] };
    return undefined;
  });
  api.get('/channels/:id/messages', (ctx) => {
    const list = state.messages.get(ctx.params['id'] ?? '');
    const generated = media?.has(ctx.params['id'] ?? '') === true ? media : undefined;
    if (list === undefined && generated === undefined) return discordError(ctx, 404, 10003, 'Unknown Channel');
    const limit = Math.min(100, Math.max(1, Number(ctx.query['limit'] ?? 50)));
    const snowflake = (name: string): bigint | undefined | null => {
      const v = ctx.query[name];
      if (v === undefined) return undefined;
      return typeof v === 'string' && /^[0-9]{1,20}$/.test(v) ? BigInt(v) : null;
    };
    const after = snowflake('after');
    const before = snowflake('before');
    if (after === null || before === null) return discordError(ctx, 400, 50035, 'Invalid Form Body: after and before must be snowflakes');
    if (generated !== undefined || list === undefined) {
      ctx.body = generated?.page(before, after, limit) ?? [];
      return undefined;
    }
    let selected = list.filter((m) => (after === undefined || BigInt(m.id) > after) && (before === undefined || BigInt(m.id) < before));
    // Discord answers newest first; with `after`, the oldest page after it.
    selected = after !== undefined ? selected.slice(0, limit) : selected.slice(-limit);
    ctx.body = selected.reverse().map(listedMessage);
    return undefined;
  });
  api.post('/channels/:id/messages', async (ctx) => {
    const channel = state.channels.get(ctx.params['id'] ?? '');
    if (channel === undefined) return discordError(ctx, 404, 10003, 'Unknown Channel');
    // JSON, or multipart with payload_json and files[n] (Discord's limits for files enforced as it streams).
    const parsed = await readCreateBody(ctx, uploads.limits);
    if (!parsed.ok) return discordError(ctx, parsed.status, parsed.code, parsed.message);
    const body = parsed.body;
    const problem = checkMessage(body, parsed.files.length);
    if (problem !== undefined) return discordError(ctx, 400, 50035, problem);
    if (channel.type === 1) {
      const recipient = channel.recipients?.[0];
      if (recipient?.dms_closed) return discordError(ctx, 403, 50007, 'Cannot send messages to this user');
    }
    // A reply (https://discord.com/developers/docs/resources/message#message-reference): to a
    // message in this channel; one that is not there is refused unless fail_if_not_exists is false,
    // when the message is created without the reference.
    const ref = body['message_reference'];
    let reference: SandboxMessage['message_reference'];
    if (ref !== undefined && ref !== null) {
      const r = ref as { message_id?: unknown; channel_id?: unknown; fail_if_not_exists?: unknown };
      if (typeof ref !== 'object' || typeof r.message_id !== 'string') return discordError(ctx, 400, 50035, 'Invalid Form Body: message_reference.message_id is required');
      const referenced = (r.channel_id === undefined || r.channel_id === channel.id) ? state.findMessage(channel.id, r.message_id) : undefined;
      if (referenced !== undefined) reference = { message_id: referenced.id, channel_id: channel.id, ...(channel.guild_id !== undefined ? { guild_id: channel.guild_id } : {}) };
      else if (r.fail_if_not_exists !== false) return discordError(ctx, 400, 50035, 'Invalid Form Body: message_reference: Unknown message');
    }
    const author = botOf(ctx);
    const nonce = body['nonce'] as string | number | undefined;
    const enforced = nonce !== undefined && body['enforce_nonce'] === true ? nonce : undefined;
    const existing = enforced !== undefined ? state.messageWithNonce(channel.id, enforced, author.id) : undefined;
    if (existing !== undefined) {
      ctx.body = createdMessage(existing);
      return undefined;
    }
    const message: SandboxMessage = {
      id: state.nextSnowflake(),
      channel_id: channel.id,
      author,
      content: typeof body['content'] === 'string' ? body['content'] : '',
      embeds: Array.isArray(body['embeds']) ? body['embeds'] : [],
      components: Array.isArray(body['components']) ? body['components'] : [],
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      type: 0,
      ...(nonce !== undefined ? { nonce } : {}),
      ...(body['allowed_mentions'] !== undefined ? { allowed_mentions: body['allowed_mentions'] } : {}),
      edits: 0,
      ...(reference !== undefined ? { message_reference: reference, type: 19 } : {}),
    };
    if (parsed.files.length > 0) message.attachments = attach(parsed.files, body, channel.id, url(), () => state.nextSnowflake(), uploads.store);
    state.addMessage(message);
    if (enforced !== undefined) state.rememberNonce(channel.id, enforced, message.id, author.id);
    state.save();
    // Discord reports every new message to the gateway, the bot's own with the nonce it was sent
    // with; other bots get it too, with its content only if it mentions them.
    dispatchMessage({ ...createdMessage(message), author: { ...publicUser(message.author), id: message.author.id }, mentions: mentionedUsers(state, message), ...(channel.guild_id !== undefined ? { guild_id: channel.guild_id } : {}) });
    const fault = ctx.state['fault'] as Fault | undefined;
    if (fault?.action === 'drop_after_create') {
      ctx.respond = false;
      ctx.req.socket.destroy();
      return undefined;
    }
    if (fault?.action === 'delay_after_create') await sleep(fault.ms ?? 1_000);
    if (fault?.action === 'error_after_create') return discordError(ctx, fault.status ?? 500, fault.code ?? 0, 'Internal Server Error');
    ctx.body = createdMessage(message);
    return undefined;
  });
  messageOpRoutes(api, state, botOf);
  if (startThread !== undefined) threadRoutes(api, state, startThread);
  api.patch('/channels/:id/messages/:messageId', async (ctx) => {
    const message = state.channelMessages(ctx.params['id'] ?? '').find((m) => m.id === ctx.params['messageId']);
    if (message === undefined) return discordError(ctx, 404, 10008, 'Unknown Message');
    if (message.author.id !== botOf(ctx).id) return discordError(ctx, 403, 50005, 'Cannot edit a message authored by another user');
    const parsed = await readJsonBody(ctx.req);
    if (!parsed.ok) return discordError(ctx, 400, 50109, 'The request body contains invalid JSON.');
    const body = parsed.value as Record<string, unknown>;
    if (typeof body['content'] === 'string') message.content = body['content'];
    if (Array.isArray(body['embeds'])) message.embeds = body['embeds'];
    if (Array.isArray(body['components'])) message.components = body['components'];
    if (body['allowed_mentions'] !== undefined) message.allowed_mentions = body['allowed_mentions'];
    message.edited_timestamp = new Date().toISOString();
    message.edits += 1;
    state.save();
    ctx.body = listedMessage(message);
    return undefined;
  });
  return api;
}

function checkMessage(body: Record<string, unknown>, files = 0): string | undefined {
  const content = body['content'];
  const embeds = body['embeds'];
  const components = body['components'];
  if (content !== undefined && (typeof content !== 'string' || content.length > 2000)) return 'content: Must be 2000 or fewer in length.';
  const hasContent = typeof content === 'string' && content.length > 0;
  if (!hasContent && files === 0 && !(Array.isArray(embeds) && embeds.length > 0) && !(Array.isArray(components) && components.length > 0)) return 'Cannot send an empty message';
  const nonce = body['nonce'];
  if (typeof nonce === 'string' && nonce.length > 25) return 'nonce: Must be 25 or fewer in length.';
  return undefined;
}
