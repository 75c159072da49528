import type { RESTPostAPIChatInputApplicationCommandsJSONBody } from 'discord.js';
import { NotFoundError } from '../../platform/errors.js';
import { mediaCommand } from '../archive/media.command.js';
import type { MediaService } from '../archive/media.service.js';
import type { DestinationService } from '../destinations/destination.service.js';
import { destinationsCommand } from '../destinations/destinations.command.js';
import { agentCommand } from '../identity/agent.command.js';
import type { IdentityService } from '../identity/identity.service.js';
import { CommandRouter, type Command } from './command.js';

/** What Herald's commands use. */
export interface CommandDeps {
  identity: IdentityService;
  destinations: DestinationService;
  /** The media archive (`/media`); absent where a process does not run it. */
  media?: MediaService | undefined;
}

/**
 * Every command Herald has: slash-command registration, the gateway's dispatch and the MCP
 * manifest (`manifest.ts`) are all built from this list.
 */
export const COMMANDS: readonly Command<CommandDeps>[] = [agentCommand, destinationsCommand, mediaCommand];

export const COMMAND_DEFINITIONS: readonly RESTPostAPIChatInputApplicationCommandsJSONBody[] = COMMANDS.map((c) => c.definition);

/** `botCanPost`: Herald's own permissions in a channel, from the platform (`Invokers.botCanPost`). */
export function commandRouter(deps: CommandDeps, botCanPost: (guildId: string, channelId: string) => Promise<boolean | undefined>): CommandRouter<CommandDeps> {
  return new CommandRouter(COMMANDS, deps, {
    botCanPost,
    isRegistered: (userId) =>
      deps.identity.registration(userId).then(
        () => true,
        (err: unknown) => {
          if (err instanceof NotFoundError) return false;
          throw err;
        },
      ),
  });
}
