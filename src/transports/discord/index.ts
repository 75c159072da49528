import { defineTransport } from '../plugin.js';

/** Discord's settings. */
export interface DiscordConfig {
  /** `DISCORD_TOKEN`: the bot token. Unset → Herald runs and uses its built-in Discord sandbox. */
  readonly token: string | undefined;
  /** `DISCORD_API_URL`: base of Discord's REST API (without `/v10`). Default Discord's own, or the sandbox's. */
  readonly apiUrl: string | undefined;
  /**
   * `HERALD_DISCORD_PER_SECOND`: Discord REST requests per second for this bot, shared by every
   * process on one database (Discord's global limit, 50/s, is per bot). Default 48, at most 49:
   * the margin lets a request start a little late without overflowing Discord's one-second window.
   */
  readonly perSecond: number;
  /** `HERALD_DISCORD_TIMEOUT_MS`: timeout of one Discord REST request. */
  readonly timeoutMs: number;
  /**
   * `HERALD_GATEWAY`: `on` (default) connects to Discord's gateway to answer `/agent` and
   * `/destinations`; `off` for extra `serve` replicas (only one process should answer commands).
   */
  readonly gateway: boolean;
  /**
   * `HERALD_DISCORD_CHAT_GUILD`: the Discord server the chat tools use on Discord (channels by
   * name, members). Unset: the bot's only server (sandbox mode: the sandbox's guild).
   */
  readonly chatGuild: string | undefined;
}

/**
 * Discord: REST for every facet (paced by one budget per bot, shared through the store), and in a
 * serving process the gateway, which answers slash commands, reports the bot's own messages with
 * their nonces, and hands on messages others write.
 */
export const discord = defineTransport<DiscordConfig>({
  name: 'discord',
  off: 'HERALD_TRANSPORT is not discord and DISCORD_TOKEN is unset',
  config(env, core) {
    const token = env.text('DISCORD_TOKEN');
    const config: DiscordConfig = {
      token,
      apiUrl: env.url('DISCORD_API_URL'),
      perSecond: env.int('HERALD_DISCORD_PER_SECOND', 48, 1, 49),
      timeoutMs: env.int('HERALD_DISCORD_TIMEOUT_MS', 15_000, 100, 600_000),
      gateway: env.onOff('HERALD_GATEWAY', true),
      chatGuild: env.text('HERALD_DISCORD_CHAT_GUILD'),
    };
    if (config.chatGuild !== undefined && !/^[0-9]{5,25}$/.test(config.chatGuild)) env.problem('HERALD_DISCORD_CHAT_GUILD must be a guild id (a snowflake)');
    // Discord is spoken where it is home (sandbox mode without a token) or where a token is given.
    if (core.home !== 'discord' && token === undefined) return undefined;
    if (core.leaseMs <= config.timeoutMs) env.problem('HERALD_LEASE_MS must be longer than HERALD_DISCORD_TIMEOUT_MS, or a slow attempt could outlive its lease');
    return Object.freeze(config);
  },

  // The Discord client is loaded only when Discord is spoken: `herald --help` and `herald mcp` stay light.
  check: async (config, log) => (await import('./discord.plugin.js')).checkToken(config, log),
  start: async (config, services) => (await import('./discord.plugin.js')).startDiscord(config, services),
});
