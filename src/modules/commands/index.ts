import { defineModule } from '../contract.js';
import type { CommandRouter } from './command.js';
import { deliveriesModule } from '../deliveries/index.js';
import { identityModule } from '../identity/index.js';
import { pruneCommandRuns } from './command-run.repository.js';
import { commandOperations } from './command.http.js';
import { CommandService, type ReplyPoster } from './command.service.js';
import { commandRouter, NO_INVOKERS } from './registry.js';
import { commandTools } from './command.tools.js';

export { CommandRouter, type Command } from './command.js';

/**
 * The command registry: every module's commands, answered through one router for the platform's
 * slash commands and for `run_command`, so the two cannot differ.
 */
export const commandsModule = defineModule<{ commands: CommandService<undefined>; router: CommandRouter<undefined> }>({
  name: 'commands',
  migrations: ['2026-11-30T07-00-00_command-runs', '2026-12-01T10-00-00_command-sources'],
  tools: commandTools,
  async start({ config, db, clock, log, transports, use, commands: all }) {
    const invokers = transports.home.invokers ?? NO_INVOKERS;
    const router = commandRouter(all(), use(identityModule).identity, (guildId, channelId) => invokers.botCanPost(guildId, channelId));
    const { deliveries } = use(deliveriesModule);
    // responseMode discord: each reply is queued in the outbox under an id derived from the
    // idempotency key, so a repeat (a retry, a re-run after a crash) is the same delivery, sent once.
    const postReply: ReplyPoster = async (requestId, guildId, channelId, content) =>
      void (await deliveries.enqueueReply({ request_id: requestId, kind: 'reply', target: { guild_id: guildId, channel_id: channelId }, body: { content } }));
    const commands = new CommandService(router, invokers, db, clock, config.commands, log, postReply);
    return {
      gives: { commands, router },
      operations: [commandOperations(commands as CommandService<unknown>, log)],
      prune: [{ what: 'command runs', run: (now) => pruneCommandRuns(db, now) }],
      surfaces: { commands: { definitions: router.commands.map((c) => c.definition), run: (invocation) => router.run(invocation) } },
    };
  },
});
