import { defineModule } from '../contract.js';
import type { CommandRouter } from './command.js';
import type { CommandService } from './command.service.js';
import { commandTools } from './command.tools.js';

export type { CommandRouter, Command } from './command.js';

/**
 * The command registry: every module's commands, answered through one router for the platform's
 * slash commands and for `run_command`, so the two cannot differ.
 */
export const commandsModule = defineModule<{ commands: CommandService<undefined>; router: CommandRouter<undefined> }>({
  name: 'commands',
  migrations: ['2026-11-30T07-00-00_command-runs', '2026-12-01T10-00-00_command-sources'],
  tools: commandTools,
  start: async (services) => (await import('./commands.module.js')).startCommands(services),
});
