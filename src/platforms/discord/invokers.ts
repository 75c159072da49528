import { Client, DiscordAPIError, MessageType, Options, PermissionFlagsBits, PermissionsBitField, Routes, type APIUser, type GuildBasedChannel } from 'discord.js';
import type { CommandInvoker, FetchedMessage, Invokers } from '../platform.js';

/** Discord's codes for a guild, channel, member, user or message that is not there or not visible. */
const NOT_FOUND_CODES = new Set([10003, 10004, 10007, 10008, 10013, 50001]);

/** What Herald needs in a channel to post there: see it, send, and show cards (embeds). */
const POST_PERMISSIONS = ['ViewChannel', 'SendMessages', 'EmbedLinks'] as const;

function notFound(err: unknown): boolean {
  return err instanceof DiscordAPIError && (NOT_FOUND_CODES.has(Number(err.code)) || err.status === 404 || err.status === 403);
}

/**
 * The invoker of a command run over MCP, as Discord knows them: guild (with its roles and owner),
 * channel (with its overwrites) and member are fetched fresh through Herald's bot session, and
 * the member's permissions in the channel are computed by discord.js itself
 * (`GuildChannel#permissionsFor`: owner, Administrator, @everyone, roles, then role and member
 * overwrites), exactly as for a slash command. A discord.js client over REST only: it never logs in
 * to the gateway, so any `serve` can answer.
 * https://discord.com/developers/docs/topics/permissions#permission-overwrites
 */
export class DiscordInvokers implements Invokers {
  private readonly client: Client;
  /** Herald's own user id (this client never logs in, so it asks once). */
  private selfId: Promise<string> | undefined;

  constructor(options: { token: string; apiUrl: string | undefined; timeoutMs: number }) {
    this.client = new Client({
      intents: [],
      // Everything is fetched with force: keep no messages and only a few members between calls.
      makeCache: Options.cacheWithLimits({ ...Options.DefaultMakeCacheSettings, MessageManager: 0, GuildMemberManager: 200, UserManager: 200 }),
      rest: { timeout: options.timeoutMs, ...(options.apiUrl !== undefined ? { api: options.apiUrl } : {}) },
    });
    this.client.rest.setToken(options.token);
  }

  async resolve(userId: string, guildId: string, channelId: string): Promise<{ invoker: CommandInvoker } | { notFound: string }> {
    const guild = await this.client.guilds.fetch({ guild: guildId, force: true }).catch((err: unknown) => {
      if (notFound(err)) return undefined;
      throw err;
    });
    if (guild === undefined) return { notFound: 'guild not found or not visible to the bot' };
    const channel = await guild.channels.fetch(channelId, { force: true }).catch((err: unknown) => {
      // discord.js refuses a channel of another guild itself.
      if (notFound(err) || (err instanceof Error && 'code' in err && err.code === 'GuildChannelUnowned')) return null;
      throw err;
    });
    if (channel === null || channel.guildId !== guildId) return { notFound: 'channel not found in that guild' };
    const member = await guild.members.fetch({ user: userId, force: true }).catch((err: unknown) => {
      if (notFound(err)) return undefined;
      throw err;
    });
    if (member === undefined) return { notFound: 'user is not a member of that guild' };
    const permissions = (channel as GuildBasedChannel).permissionsFor(member) ?? new PermissionsBitField();
    return {
      invoker: {
        user: { id: member.user.id, username: member.user.username, globalName: member.user.globalName, bot: member.user.bot },
        guildId,
        channelId,
        permissions: permissions.toArray(),
        canManageGuild: permissions.has(PermissionFlagsBits.ManageGuild),
      },
    };
  }

  async botCanPost(guildId: string, channelId: string): Promise<boolean | undefined> {
    this.selfId ??= (this.client.rest.get(Routes.user()) as Promise<APIUser>).then((u) => u.id);
    const selfId = await this.selfId.catch((err: unknown) => {
      this.selfId = undefined;
      throw err;
    });
    const found = await this.resolve(selfId, guildId, channelId);
    // No such channel there: not a question of Herald's permissions. Not a member: it can post nowhere.
    if ('notFound' in found) return found.notFound === 'user is not a member of that guild' ? false : undefined;
    // Names as discord.js computed them (permissionsFor), e.g. SendMessages.
    return POST_PERMISSIONS.every((p) => found.invoker.permissions.includes(p));
  }

  async message(channelId: string, messageId: string): Promise<FetchedMessage | undefined> {
    const channel = await this.client.channels.fetch(channelId).catch((err: unknown) => {
      if (notFound(err)) return null;
      throw err;
    });
    if (channel === null || !channel.isTextBased()) return undefined;
    const message = await channel.messages.fetch({ message: messageId, force: true, cache: false }).catch((err: unknown) => {
      if (notFound(err)) return undefined;
      throw err;
    });
    if (message === undefined || message.channelId !== channelId) return undefined;
    // createdAt is discord.js's reading of the snowflake id: Discord's own clock, not the caller's word.
    // Only a message typed (or a reply) is the author's words; a join, a pin or a boost is Discord's.
    // https://discord.com/developers/docs/resources/message#message-object-message-types
    const writtenByAuthor = message.type === MessageType.Default || message.type === MessageType.Reply;
    return { id: message.id, channelId, authorId: message.author.id, authorIsBot: message.author.bot, createdAt: message.createdAt, writtenByAuthor };
  }

  destroy(): Promise<void> {
    return this.client.destroy();
  }
}
