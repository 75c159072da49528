import { deliveriesModule } from '../deliveries/index.js';
import { identityModule } from '../identity/index.js';
import { defineModule, ownTables } from '../contract.js';
import { readCommandLimits, type CommandLimits } from './settings.js';
import type { CommandsDb } from './command-run.table.js';
import type { CommandRouter } from './command.js';
import type { CommandService } from './command.service.js';
import { commandTools } from './command.tools.js';

export type { CommandRouter, Command } from './command.js';

/**
 * The command registry: every module's commands, answered through one router for the platform's
 * slash commands and for `run_command`, so the two cannot differ.
 */
export const commandsModule = defineModule<{ commands: CommandService<undefined>; router: CommandRouter<undefined> }, undefined, CommandLimits, CommandsDb>({
  name: 'commands',
  needs: { modules: [deliveriesModule, identityModule] },
  tables: ownTables<CommandsDb>(),
  config: readCommandLimits,
  tools: commandTools,
  start: async (services) => (await import('./commands.module.js')).startCommands(services),
});
