import type Router from '@koa/router';
import { PermissionFlagsBits } from 'discord.js';
import { readJsonBody } from '../../../infra/http/body.js';
import { SANDBOX_IDS } from './ids.js';
import { discordError } from './errors.js';
import { publicUser, type SandboxMessage, type SandboxState, type SandboxUser } from './state.js';

/**
 * Who is in the sandbox's guilds and what they may do: roles, members with their roles, the
 * guild's owner and channels' permission overwrites, served as Discord serves them (GET guild,
 * guild member, one channel's overwrites, one message), so Herald computes a member's permissions
 * with discord.js exactly as against Discord. Also messages written by users (the control route),
 * which `run_command` checks as its source message.
 * https://discord.com/developers/docs/topics/permissions
 */

export interface SandboxRole {
  id: string;
  name: string;
  /** A permission bit-set as a decimal string. */
  permissions: string;
  position: number;
}
export type { SandboxOverwrite } from './state.js';

/** The seeded world's people beyond the first user: one who manages the server, and another bot. */
export const SANDBOX_MEMBER_IDS = {
  manager: '123456789012345679',
  otherBot: '123456789012345680',
  owner: '123456789012345681',
  managersRole: '456789012345678901',
  /** Herald's own role, as Discord gives a bot the permissions its invite asked for. */
  heraldRole: '456789012345678902',
} as const;

const everyday = PermissionFlagsBits.ViewChannel | PermissionFlagsBits.SendMessages | PermissionFlagsBits.ReadMessageHistory | PermissionFlagsBits.UseApplicationCommands;

/** Roles and members by guild; the `@everyone` role has the guild's id. */
export class GuildMembers {
  readonly roles = new Map<string, SandboxRole[]>();
  /** `${guildId}:${userId}` → the member's role ids (without @everyone). */
  readonly members = new Map<string, string[]>();
  readonly owners = new Map<string, string>();

  constructor(private readonly state: SandboxState) {}

  /** Every guild gets @everyone with everyday permissions; the seeded guild its people. */
  seed(): void {
    for (const g of this.state.guilds.values()) {
      this.roles.set(g.id, [{ id: g.id, name: '@everyone', permissions: String(everyday), position: 0 }]);
      this.setMember(g.id, this.state.bot.id, []);
    }
    const guild = SANDBOX_IDS.guild;
    this.addRole(guild, { id: SANDBOX_MEMBER_IDS.managersRole, name: 'Server Managers', permissions: String(everyday | PermissionFlagsBits.ManageGuild), position: 1 });
    this.addRole(guild, { id: SANDBOX_MEMBER_IDS.heraldRole, name: 'Herald', permissions: String(everyday | PermissionFlagsBits.EmbedLinks), position: 2 });
    this.setMember(guild, this.state.bot.id, [SANDBOX_MEMBER_IDS.heraldRole]);
    this.state.addUser({ id: SANDBOX_MEMBER_IDS.manager, username: 'morgan', global_name: 'Morgan' });
    this.state.addUser({ id: SANDBOX_MEMBER_IDS.otherBot, username: 'relay', global_name: 'Relay', bot: true });
    this.state.addUser({ id: SANDBOX_MEMBER_IDS.owner, username: 'ada', global_name: 'Ada' });
    this.owners.set(guild, SANDBOX_MEMBER_IDS.owner);
    this.setMember(guild, SANDBOX_IDS.user, []);
    this.setMember(guild, SANDBOX_MEMBER_IDS.manager, [SANDBOX_MEMBER_IDS.managersRole]);
    this.setMember(guild, SANDBOX_MEMBER_IDS.otherBot, [SANDBOX_MEMBER_IDS.managersRole]);
    this.setMember(guild, SANDBOX_MEMBER_IDS.owner, []);
  }

  addRole(guildId: string, role: SandboxRole): void {
    const roles = this.roles.get(guildId) ?? [{ id: guildId, name: '@everyone', permissions: String(everyday), position: 0 }];
    this.roles.set(guildId, [...roles.filter((r) => r.id !== role.id), role]);
  }
  setMember(guildId: string, userId: string, roleIds: string[]): void {
    this.members.set(`${guildId}:${userId}`, roleIds);
  }
  removeMember(guildId: string, userId: string): void {
    this.members.delete(`${guildId}:${userId}`);
  }
}

/**
 * A message a user writes in a channel (the sandbox's stand-in for a person typing in Discord), or
 * with another `type` a system message Discord shows under their name (7: they joined).
 */
export function writeAsUser(state: SandboxState, author: SandboxUser, channelId: string, content: string, type = 0): SandboxMessage {
  const message: SandboxMessage = {
    id: state.nextSnowflake(),
    channel_id: channelId,
    author,
    content,
    embeds: [],
    components: [],
    timestamp: new Date().toISOString(),
    edited_timestamp: null,
    type,
    edits: 0,
  };
  state.addMessage(message);
  return message;
}

/** The REST routes: GET a guild (with roles and owner), a member, and one message. */
export function guildMemberRoutes(api: Router, state: SandboxState, people: GuildMembers, listedMessage: (m: SandboxMessage) => Record<string, unknown>): void {
  api.get('/guilds/:id', (ctx) => {
    const guild = state.guilds.get(ctx.params['id'] ?? '');
    if (guild === undefined) return discordError(ctx, 404, 10004, 'Unknown Guild');
    ctx.body = {
      id: guild.id,
      name: guild.name,
      icon: null,
      owner_id: people.owners.get(guild.id) ?? state.bot.id,
      features: [],
      emojis: [],
      stickers: [],
      roles: (people.roles.get(guild.id) ?? []).map((r) => ({ ...r, color: 0, hoist: false, managed: false, mentionable: false, flags: 0 })),
    };
    return undefined;
  });
  api.get('/guilds/:id/members/:userId', (ctx) => {
    const guildId = ctx.params['id'] ?? '';
    if (!state.guilds.has(guildId)) return discordError(ctx, 404, 10004, 'Unknown Guild');
    const user = state.users.get(ctx.params['userId'] ?? '');
    const roles = people.members.get(`${guildId}:${ctx.params['userId'] ?? ''}`);
    if (user === undefined || roles === undefined) return discordError(ctx, 404, 10007, 'Unknown Member');
    ctx.body = { user: publicUser(user), roles, joined_at: new Date(0).toISOString(), deaf: false, mute: false, flags: 0 };
    return undefined;
  });
  api.get('/channels/:id/messages/:messageId', (ctx) => {
    if (!state.channels.has(ctx.params['id'] ?? '')) return discordError(ctx, 404, 10003, 'Unknown Channel');
    const message = state.channelMessages(ctx.params['id'] ?? '').find((m) => m.id === ctx.params['messageId']);
    if (message === undefined) return discordError(ctx, 404, 10008, 'Unknown Message');
    ctx.body = listedMessage(message);
    return undefined;
  });
}

/** The control route `POST /sandbox/api/messages`: a user writes a message in a channel. */
export function userMessageRoute(router: Router, state: SandboxState, dispatch: (type: string, data: unknown) => void): void {
  router.post('/sandbox/api/messages', async (ctx) => {
    // Like the interactions route: acts as a user, so a web page elsewhere must not drive it.
    const origin = ctx.get('origin');
    const site = ctx.get('sec-fetch-site');
    if ((origin !== '' && origin !== `${ctx.protocol}://${ctx.host}`) || (site !== '' && site !== 'same-origin' && site !== 'none')) {
      ctx.status = 403;
      ctx.body = { error: 'cross-origin requests are refused' };
      return;
    }
    const body = await readJsonBody(ctx.req);
    const input = (body.ok ? body.value : {}) as Record<string, unknown>;
    const author = state.users.get(String(input['userId']));
    // `dm: true` writes to the bot (Herald's own, or `botId`'s) in the person's DM channel with it (opened if needed).
    const botId = typeof input['botId'] === 'string' && state.users.get(input['botId'])?.bot === true ? input['botId'] : undefined;
    if (input['botId'] !== undefined && botId === undefined) {
      ctx.status = 400;
      ctx.body = { error: 'botId must be the id of a bot in this sandbox' };
      return;
    }
    const channel = input['dm'] === true && author !== undefined ? state.dmChannel(author, botId) : state.channels.get(String(input['channelId']));
    const content = input['content'];
    if (author === undefined || channel === undefined || typeof content !== 'string' || content.length === 0 || content.length > 2000) {
      ctx.status = 400;
      ctx.body = { error: 'expected {userId, channelId or dm: true, content, replyTo?} of a known user and channel, content 1-2000 characters' };
      return;
    }
    const replyTo = input['replyTo'];
    const target = typeof replyTo === 'string' ? state.channelMessages(channel.id).find((m) => m.id === replyTo) : undefined;
    if (replyTo !== undefined && target === undefined) {
      ctx.status = 400;
      ctx.body = { error: 'replyTo must be the id of a message in that channel' };
      return;
    }
    const message = writeAsUser(state, author, channel.id, content, target !== undefined ? 19 : 0);
    if (target !== undefined) message.message_reference = { message_id: target.id, channel_id: channel.id, ...(channel.guild_id !== undefined ? { guild_id: channel.guild_id } : {}) };
    state.save();
    dispatch('MESSAGE_CREATE', {
      ...publicMessage(message),
      ...(channel.guild_id !== undefined ? { guild_id: channel.guild_id } : {}),
      // As Discord sends it: discord.js opens an uncached DM channel from it.
      channel_type: channel.type,
      // A reply mentions (pings) the author of the message it replies to, as Discord's client does by default.
      ...(target !== undefined ? { message_reference: message.message_reference, repliedTo: target.author.id } : {}),
    });
    ctx.body = { id: message.id, channel_id: message.channel_id, author_id: author.id };
  });
}

/**
 * The control route `POST /sandbox/api/reactions {userId, channelId, messageId, emoji}`: a person
 * reacts to a message; the bot's sessions get MESSAGE_REACTION_ADD
 * (https://discord.com/developers/docs/events/gateway-events#message-reaction-add).
 */
export function userReactionRoute(router: Router, state: SandboxState, dispatch: (type: string, data: unknown) => void): void {
  router.post('/sandbox/api/reactions', async (ctx) => {
    const origin = ctx.get('origin');
    const site = ctx.get('sec-fetch-site');
    if ((origin !== '' && origin !== `${ctx.protocol}://${ctx.host}`) || (site !== '' && site !== 'same-origin' && site !== 'none')) {
      ctx.status = 403;
      ctx.body = { error: 'cross-origin requests are refused' };
      return;
    }
    const body = await readJsonBody(ctx.req);
    const input = (body.ok ? body.value : {}) as Record<string, unknown>;
    const user = state.users.get(String(input['userId']));
    const channel = state.channels.get(String(input['channelId']));
    const message = channel !== undefined ? state.channelMessages(channel.id).find((m) => m.id === input['messageId']) : undefined;
    const emoji = input['emoji'];
    if (user === undefined || channel === undefined || message === undefined || typeof emoji !== 'string' || emoji.length === 0 || emoji.length > 32) {
      ctx.status = 400;
      ctx.body = { error: 'expected {userId, channelId, messageId, emoji} of a known user, channel and message, emoji 1-32 characters' };
      return;
    }
    dispatch('MESSAGE_REACTION_ADD', {
      user_id: user.id,
      channel_id: channel.id,
      message_id: message.id,
      message_author_id: message.author.id,
      ...(channel.guild_id !== undefined ? { guild_id: channel.guild_id, member: { user: publicUser(user), roles: [], joined_at: new Date(0).toISOString(), deaf: false, mute: false, flags: 0 } } : {}),
      emoji: { id: null, name: emoji },
      burst: false,
      type: 0,
    });
    ctx.status = 204;
  });
}

function publicMessage(m: SandboxMessage): Record<string, unknown> {
  return { id: m.id, channel_id: m.channel_id, author: publicUser(m.author), content: m.content, timestamp: m.timestamp, edited_timestamp: null, type: m.type, embeds: [], attachments: [], mentions: [], mention_roles: [], pinned: false, tts: false, mention_everyone: false };
}
