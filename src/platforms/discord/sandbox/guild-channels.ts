import type Router from '@koa/router';
import { readJsonBody } from '../../../infra/http/body.js';
import type { GuildMembers } from './guild-members.js';
import { discordError } from './errors.js';
import { threadChannel } from './gateway.js';
import { publicUser, THREAD_TYPE, type SandboxState } from './state.js';

/**
 * The guild routes the chat tools use on Discord: the bot's guilds, a guild's channels (list,
 * create a text channel) and its members, served as Discord serves them.
 */
export function guildChannelRoutes(api: Router, state: SandboxState, people: GuildMembers): void {
  // https://discord.com/developers/docs/resources/user#get-current-user-guilds
  api.get('/users/@me/guilds', (ctx) => {
    ctx.body = [...state.guilds.values()].map((g) => ({ id: g.id, name: g.name, icon: null, owner: false, permissions: '0', features: [] }));
  });
  // https://discord.com/developers/docs/resources/guild#get-guild-channels
  api.get('/guilds/:id/channels', (ctx) => {
    const guildId = ctx.params['id'] ?? '';
    if (!state.guilds.has(guildId)) return discordError(ctx, 404, 10004, 'Unknown Guild');
    // As on Discord, threads are not listed here (they are the active threads' route).
    ctx.body = [...state.channels.values()]
      .filter((c) => c.guild_id === guildId && c.type !== THREAD_TYPE)
      .map((c) => ({ id: c.id, type: c.type, name: c.name, guild_id: c.guild_id, position: 0, permission_overwrites: c.permission_overwrites ?? [] }));
    return undefined;
  });
  // https://discord.com/developers/docs/resources/guild#list-active-guild-threads (the sandbox never archives one)
  api.get('/guilds/:id/threads/active', (ctx) => {
    const guildId = ctx.params['id'] ?? '';
    if (!state.guilds.has(guildId)) return discordError(ctx, 404, 10004, 'Unknown Guild');
    const threads = [...state.channels.values()].filter((c) => c.guild_id === guildId && c.type === THREAD_TYPE);
    ctx.body = { threads: threads.map((t) => threadChannel(guildId, { id: t.id, type: t.type, ...(t.name !== undefined ? { name: t.name } : {}), ...(t.parent_id !== undefined ? { parent_id: t.parent_id } : {}) })), members: [] };
    return undefined;
  });
  // https://discord.com/developers/docs/resources/guild#create-guild-channel (the sandbox bot has Manage Channels)
  api.post('/guilds/:id/channels', async (ctx) => {
    const guildId = ctx.params['id'] ?? '';
    if (!state.guilds.has(guildId)) return discordError(ctx, 404, 10004, 'Unknown Guild');
    const body = await readJsonBody(ctx.req);
    const name = body.ok ? (body.value as { name?: unknown }).name : undefined;
    if (typeof name !== 'string' || name.length < 1 || name.length > 100) return discordError(ctx, 400, 50035, 'Invalid Form Body');
    const channel = { id: state.nextSnowflake(), type: 0, name, guild_id: guildId };
    state.addChannel(channel);
    ctx.status = 201;
    ctx.body = { ...channel, position: 0, permission_overwrites: [] };
    return undefined;
  });
  // https://discord.com/developers/docs/resources/guild#list-guild-members
  api.get('/guilds/:id/members', (ctx) => {
    const guildId = ctx.params['id'] ?? '';
    if (!state.guilds.has(guildId)) return discordError(ctx, 404, 10004, 'Unknown Guild');
    const prefix = `${guildId}:`;
    ctx.body = [...people.members.entries()].flatMap(([key, roles]) => {
      const user = key.startsWith(prefix) ? state.users.get(key.slice(prefix.length)) : undefined;
      return user === undefined ? [] : [{ user: publicUser(user), nick: null, roles, joined_at: new Date(0).toISOString(), deaf: false, mute: false, flags: 0 }];
    });
    return undefined;
  });
}
