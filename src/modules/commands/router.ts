import { NotFoundError } from '../../infra/errors.js';
import type { Invokers } from '../../platforms/platform.js';
import type { IdentityService } from '../identity/index.js';
import { CommandRouter, type Command } from './command.js';

/**
 * The router of every command Herald has: the modules declare their commands (src/modules/contract.ts),
 * each bound to what its module gives, and the wiring hands them here in the modules' order.
 * `botCanPost`: Herald's own permissions in a channel, from the platform (`Invokers.botCanPost`).
 */
export function commandRouter(
  commands: readonly Command<undefined>[],
  identity: IdentityService,
  botCanPost: (guildId: string, channelId: string) => Promise<boolean | undefined>,
): CommandRouter<undefined> {
  return new CommandRouter(commands, undefined, {
    botCanPost,
    isRegistered: (userId, speaksAs) =>
      identity.registration(userId, speaksAs).then(
        () => true,
        (err: unknown) => {
          if (err instanceof NotFoundError) return false;
          throw err;
        },
      ),
  });
}

/** A platform without its own view of who invokes a command: nobody is found, nothing is known. */
export const NO_INVOKERS: Invokers = {
  resolve: async () => ({ notFound: 'guild' }),
  message: async () => undefined,
  botCanPost: async () => undefined,
};
