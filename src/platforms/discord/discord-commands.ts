import type { APIApplicationCommandOption, RESTPostAPIChatInputApplicationCommandsJSONBody } from 'discord.js';
import type { CommandDefinition, CommandOption } from '../platform.js';

/**
 * Herald's command definition (src/platforms/commands.ts) as Discord registers it: a chat-input
 * command whose options keep every field the definition gives (descriptions, choices, channel
 * types, lengths), numbered as Discord numbers its option types.
 */
export function discordCommand(definition: CommandDefinition): RESTPostAPIChatInputApplicationCommandsJSONBody {
  const { options, ...rest } = definition;
  return { ...rest, ...(options !== undefined ? { options: options.map(discordOption) } : {}) };
}

function discordOption(option: CommandOption): APIApplicationCommandOption {
  const { options, ...rest } = option;
  // The definition's option numbers are Discord's (1 a subcommand, 3 a string, 7 a channel, …).
  return { ...rest, ...(options !== undefined ? { options: options.map(discordOption) } : {}) } as APIApplicationCommandOption;
}
