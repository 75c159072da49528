import { readFileSync } from 'node:fs';
import type { EnvReader } from '../../infra/env.js';
import { parseIdentityEntry } from '../../infra/policy/identity.js';
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

/**
 * HERALD_DISCORD_IDENTITIES, each bot's token read from where it says (settings.ts). With a real
 * Discord (DISCORD_TOKEN set) every one needs its token; in sandbox mode none may name one (the
 * sandbox makes the bots). A token is never logged nor stored: only where it is read from is said.
 */
function identitiesOf(env: EnvReader, main: string | undefined): DiscordIdentity[] {
  const real = main !== undefined;
  const out: DiscordIdentity[] = [];
  for (const entry of env.list('HERALD_DISCORD_IDENTITIES')) {
    const parsed = parseIdentityEntry(entry);
    if ('problem' in parsed) {
      env.problem(`HERALD_DISCORD_IDENTITIES: ${parsed.problem}`);
      continue;
    }
    const { name, source } = parsed;
    if (out.some((i) => i.name === name)) env.problem(`HERALD_DISCORD_IDENTITIES names ${name} twice`);
    if (source === undefined) {
      if (real) env.problem(`HERALD_DISCORD_IDENTITIES: identity ${name} needs its bot token (${name}=env:VARIABLE or ${name}=file:/path)`);
      out.push({ name, token: undefined });
      continue;
    }
    if (!real) env.problem(`HERALD_DISCORD_IDENTITIES: identity ${name} names a token, but DISCORD_TOKEN is unset (sandbox mode makes its bots: give bare names)`);
    let token: string | undefined;
    if ('env' in source) token = env.text(source.env)?.trim();
    else {
      try {
        token = readFileSync(source.file, 'utf8').trim();
      } catch (err) {
        env.problem(`HERALD_DISCORD_IDENTITIES: identity ${name}: cannot read ${source.file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
        continue;
      }
    }
    if (token === undefined || token === '') env.problem(`HERALD_DISCORD_IDENTITIES: identity ${name}: ${'env' in source ? `${source.env} is unset or empty` : `${source.file} is empty`}`);
    else if (token === main?.trim() || out.some((i) => i.token === token)) env.problem(`HERALD_DISCORD_IDENTITIES: identity ${name} has the token of ${token === main?.trim() ? 'DISCORD_TOKEN' : `identity ${out.find((i) => i.token === token)?.name ?? ''}`}: each identity is a bot of its own (start-up also asks Discord whose each token is)`);
    else out.push({ name, token });
  }
  return out;
}

