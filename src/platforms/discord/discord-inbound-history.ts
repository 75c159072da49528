import { ChannelType, Routes, type APIChannel, type APIGuild, type APIMessage, type APIThreadChannel, type REST } from 'discord.js';
import type { InboundHistory, InboundMessage } from '../platform.js';
import { snowflakeAt, snowflakeTime } from './snowflake.js';

/** Discord's largest page of channel messages. */
const PAGE = 100;
/** Discord's largest page of the bot's guilds. */
const GUILD_PAGE = 200;
/** Where messages can reach the bot: guild text and announcement channels, and threads. */
const READABLE = new Set<number>([ChannelType.GuildText, ChannelType.GuildAnnouncement, ChannelType.AnnouncementThread, ChannelType.PublicThread, ChannelType.PrivateThread]);

export interface DiscordInboundHistoryOptions {
  /** The transport's REST client: every request goes through the bot's shared rate budget. */
  rest: REST;
  /** Translates discord.js errors into the transport's. */
  call: <T>(fn: () => Promise<T>) => Promise<T>;
  selfId: () => Promise<string>;
}

/**
 * The reading half of Discord's catch-up (src/platforms/platform.ts `InboundHistory`): the text
 * channels and active threads of the bot's guilds, and their messages since a point, over REST.
 * Without the Message Content intent Discord lists the content of the messages that mention the
 * bot only, which is what handoffs need. Whether the session is held is the gateway's to say.
 */
export class DiscordInboundHistory implements Pick<InboundHistory, 'channels' | 'since'> {
  /** The threads `channels` listed (a message read from one is in that thread). */
  private readonly threads = new Set<string>();
  /** The guild of each channel and thread `channels` listed, or `since` looked up (a message read back is in it). */
  private readonly guildOf = new Map<string, string>();

  constructor(private readonly o: DiscordInboundHistoryOptions) {}

  /**
   * https://discord.com/developers/docs/resources/user#get-current-user-guilds,
   * https://discord.com/developers/docs/resources/guild#get-guild-channels and
   * https://discord.com/developers/docs/resources/guild#list-active-guild-threads
   */
  async channels(signal: AbortSignal): Promise<string[]> {
    const ids = new Set<string>();
    for (const guildId of await this.guilds(signal)) {
      const channels = (await this.o.call(() => this.o.rest.get(Routes.guildChannels(guildId), { signal }))) as APIChannel[];
      for (const c of channels) {
        if (!READABLE.has(c.type)) continue;
        ids.add(c.id);
        this.guildOf.set(c.id, guildId);
      }
      const active = (await this.o.call(() => this.o.rest.get(Routes.guildActiveThreads(guildId), { signal }))) as { threads: APIThreadChannel[] };
      for (const t of active.threads) {
        if (!READABLE.has(t.type)) continue;
        ids.add(t.id);
        this.threads.add(t.id);
        this.guildOf.set(t.id, guildId);
      }
    }
    return [...ids];
  }

  /** https://discord.com/developers/docs/resources/message#get-channel-messages with `after` */
  async since(channelId: string, afterId: string | undefined, from: Date, signal: AbortSignal): Promise<{ messages: InboundMessage[]; last: string | undefined; complete: boolean }> {
    const floor = snowflakeAt(from);
    const after = afterId !== undefined && BigInt(afterId) > BigInt(floor) ? afterId : floor;
    const query = new URLSearchParams({ after, limit: String(PAGE) });
    const page = (await this.o.call(() => this.o.rest.get(Routes.channelMessages(channelId), { query, signal }))) as APIMessage[];
    const self = await this.o.selfId();
    const guildId = page.length > 0 ? await this.guild(channelId, signal) : undefined;
    const ordered = [...page].sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
    const messages = ordered
      .filter((m) => m.author.id !== self)
      .map((m) => ({
        channelId: m.channel_id,
        messageId: m.id,
        authorId: m.author.id,
        authorIsBot: m.author.bot === true,
        // Every channel read back is a guild's (the contract allows a null guild only in a DM).
        guildId,
        content: m.content,
        createdAt: snowflakeTime(m.id),
        heard: {
          authorName: m.author.global_name ?? m.author.username,
          mentions: m.mentions.map((u) => u.id),
          threadId: this.threads.has(m.channel_id) ? m.channel_id : null,
          replyTo: m.message_reference?.message_id ?? null,
          attachments: m.attachments.map((a) => ({ id: a.id, filename: a.filename, contentType: a.content_type ?? null, size: a.size, url: a.url })),
        },
      }));
    return { messages, last: ordered.at(-1)?.id, complete: page.length < PAGE };
  }

  /**
   * The guild a channel read back is in: as `channels` listed it, or asked of Discord once
   * (https://discord.com/developers/docs/resources/channel#get-channel).
   */
  private async guild(channelId: string, signal: AbortSignal): Promise<string | undefined> {
    const known = this.guildOf.get(channelId);
    if (known !== undefined) return known;
    const channel = (await this.o.call(() => this.o.rest.get(Routes.channel(channelId), { signal }))) as { guild_id?: string };
    if (channel.guild_id !== undefined) this.guildOf.set(channelId, channel.guild_id);
    return channel.guild_id;
  }

  private async guilds(signal: AbortSignal): Promise<string[]> {
    const ids: string[] = [];
    let after: string | undefined;
    for (;;) {
      const query = new URLSearchParams({ limit: String(GUILD_PAGE), ...(after !== undefined ? { after } : {}) });
      const page = (await this.o.call(() => this.o.rest.get(Routes.userGuilds(), { query, signal }))) as Pick<APIGuild, 'id'>[];
      for (const g of page) ids.push(g.id);
      if (page.length < GUILD_PAGE) return ids;
      after = page.reduce((max, g) => (BigInt(g.id) > BigInt(max) ? g.id : max), page[0]?.id ?? '0');
    }
  }
}

/**
 * The whole `InboundHistory` facet: the reading half, and the gateway's say on whether this
 * process holds the session (`held`); the gateway calls `nowHeld` each time its session opens.
 */
export function heldHistory(reading: Pick<InboundHistory, 'channels' | 'since'>, held: () => boolean): InboundHistory & { nowHeld(): void } {
  const listeners = new Set<() => void>();
  return {
    channels: (signal) => reading.channels(signal),
    since: (channelId, afterId, from, signal) => reading.since(channelId, afterId, from, signal),
    held,
    onHeld: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    nowHeld: () => {
      for (const listener of listeners) listener();
    },
  };
}
