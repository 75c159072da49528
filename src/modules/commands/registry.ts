import type { RESTPostAPIChatInputApplicationCommandsJSONBody } from 'discord.js';
import type { DestinationService } from '../destinations/destination.service.js';
import { destinationsCommand } from '../destinations/destinations.command.js';
import { agentCommand } from '../identity/agent.command.js';
import type { IdentityService } from '../identity/identity.service.js';
import { CommandRouter, type Command } from './command.js';

/** What Herald's commands use. */
export interface CommandDeps {
  identity: IdentityService;
  destinations: DestinationService;
}

/** Every command Herald has: slash-command registration and dispatch are both built from this list. */
export const COMMANDS: readonly Command<CommandDeps>[] = [agentCommand, destinationsCommand];

export const COMMAND_DEFINITIONS: readonly RESTPostAPIChatInputApplicationCommandsJSONBody[] = COMMANDS.map((c) => c.definition);

export function commandRouter(deps: CommandDeps): CommandRouter<CommandDeps> {
  return new CommandRouter(COMMANDS, deps);
}
