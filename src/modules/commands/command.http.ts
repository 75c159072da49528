import { errorSummary } from '../../infra/errors.js';
import type { OperationHandlers } from '../../infra/http/api.js';
import { reply } from '../../infra/http/reply.js';
import type { Logger } from 'pino';
import { DiscordUnavailableError, type CommandService, type RunRequest } from './command.service.js';

/** The command registry over the bridge: list, describe (by name or alias), run. */
export function commandOperations(commands: CommandService<unknown>, log: Logger): OperationHandlers {
  return (kit) => ({
    listCommands: () => reply('listCommands', 200, { fingerprint: commands.fingerprint, commands: [...commands.manifest] }),
    describeCommand: (c) => {
      const found = commands.describe(String(c.request.params['name']));
      return found === undefined ? reply('describeCommand', 404, { error: 'unknown command' }) : reply('describeCommand', 200, found);
    },
    runCommand: async (_c, body) => {
      kit.checkBody('runCommand', body);
      try {
        return reply('runCommand', 200, await commands.run(body as RunRequest));
      } catch (err) {
        if (!(err instanceof DiscordUnavailableError)) throw err;
        // Resolving the invoker or the source message needs Discord: it could not answer.
        log.warn({ err: errorSummary(err) }, 'run_command could not reach Discord');
        return reply('runCommand', 503, { error: 'discord unavailable' });
      }
    },
  });
}
