import type { EnvReader } from '../../infra/env.js';
import { tokenIdentities } from '../identity-tokens.js';
import { definePlatform } from '../plugin.js';
import type { DiscordConfig, DiscordIdentity } from './settings.js';

export type { DiscordConfig } from './settings.js';

/**
 * Discord: REST for every facet (paced by one budget per bot, shared through the store), and in a
 * serving process the gateway, which answers slash commands, reports the bot's own messages with
 * their nonces, and hands on messages others write.
 */
export const discord = definePlatform<DiscordConfig>({
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
      maxFileBytes: env.int('HERALD_DISCORD_MAX_FILE_BYTES', 10 * 1024 * 1024, 1, 500 * 1024 * 1024),
      messageContent: env.onOff('HERALD_DISCORD_MESSAGE_CONTENT', false),
      identities: identitiesOf(env, token),
    };
    if (config.chatGuild !== undefined && !/^[0-9]{5,25}$/.test(config.chatGuild)) env.problem('HERALD_DISCORD_CHAT_GUILD must be a guild id (a snowflake)');
    // Discord is spoken where it is home (sandbox mode without a token) or where a token is given.
    if (core.home !== 'discord' && token === undefined) return undefined;
    if (core.leaseMs <= config.timeoutMs) env.problem('HERALD_LEASE_MS must be longer than HERALD_DISCORD_TIMEOUT_MS, or a slow attempt could outlive its lease');
    return Object.freeze(config);
  },

  identities: (config) => config.identities.map((i) => i.name),
  // The Discord client is loaded only when Discord is spoken: `herald --help` and `herald mcp` stay light.
  check: async (config, log) => (await import('./discord.plugin.js')).checkToken(config, log),
  start: async (config, services) => (await import('./discord.plugin.js')).startDiscord(config, services),
  // Sandbox mode is Discord's home without a token: a local Discord, loaded only then.
  sandbox: {
    needed: (config) => config !== undefined && config.token === undefined,
    reason: 'DISCORD_TOKEN is not set',
    start: async (options) => (await import('./discord-sandbox-mode.js')).startDiscordSandbox(options),
  },
});

/** HERALD_DISCORD_IDENTITIES, each bot's token read from where it says (settings.ts, src/platforms/identity-tokens.ts). */
function identitiesOf(env: EnvReader, main: string | undefined): DiscordIdentity[] {
  return tokenIdentities(env, {
    variable: 'HERALD_DISCORD_IDENTITIES',
    main: { variable: 'DISCORD_TOKEN', value: main },
    what: 'bot token',
    sandboxMakes: 'bots',
    ownNote: 'a bot of its own (start-up also asks Discord whose each token is)',
  });
}
