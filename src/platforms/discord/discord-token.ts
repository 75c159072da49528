import { StartupError } from '../../infra/startup.js';

/**
 * Discord refused the bot token itself (401): nothing Herald would send can succeed, so start-up
 * stops with this (exit 2, no stack trace). Imports nothing from discord.js: the CLI loads it
 * before choosing a command.
 */
export function discordTokenRejected(status: number, cause: unknown, what = 'DISCORD_TOKEN'): StartupError {
  return new StartupError(`Discord rejected ${what} (${status}): check the bot token (Discord developer portal → your application → Bot → Reset Token)`, { cause });
}
