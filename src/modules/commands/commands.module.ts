import type { ModuleParts, ModuleServices } from '../contract.js';
import type { CommandLimits } from './settings.js';
import { deliveriesModule } from '../deliveries/index.js';
import { identityModule } from '../identity/index.js';
import { pruneCommandRuns } from './command-run.repository.js';
import type { CommandRouter } from './command.js';
import { commandOperations } from './command.http.js';
import { CommandService, type ReplyPoster } from './command.service.js';
import { commandRouter, NO_INVOKERS } from './router.js';
import { replySendKind } from './reply.kind.js';
import { tablesOf } from '../../infra/db/tables.js';
import type { CommandsDb } from './command-run.table.js';

/** Start the command registry (its declaration is index.ts). */
export async function startCommands({ settings, db: tables, clock, log, transports, use, commands: all }: ModuleServices<CommandLimits>): Promise<ModuleParts<{ commands: CommandService<undefined>; router: CommandRouter<undefined> }>> {
  const db = tablesOf<CommandsDb>(tables);
  const invokers = transports.home.invokers ?? NO_INVOKERS;
  const router = commandRouter(all(), use(identityModule).identity, (guildId, channelId) => invokers.botCanPost(guildId, channelId));
  const { deliveries, declare } = use(deliveriesModule);
  declare(replySendKind);
  // responseMode discord: each reply is queued in the outbox under an id derived from the
  // idempotency key, so a repeat (a retry, a re-run after a crash) is the same delivery, sent once.
  const postReply: ReplyPoster = async (requestId, guildId, channelId, content) =>
    void (await deliveries.enqueueReply({ request_id: requestId, kind: 'reply', target: { guild_id: guildId, channel_id: channelId }, body: { content } }));
  const commands = new CommandService(router, invokers, db, clock, settings, log, postReply);
  const everyBot = router.commands.filter((c) => c.everyBot === true);
  return {
    gives: { commands, router },
    operations: [commandOperations(commands as CommandService<unknown>, log)],
    prune: [{ what: 'command runs', run: (now) => pruneCommandRuns(db, now) }],
    surfaces: {
      commands: {
        definitions: router.commands.map((c) => c.definition),
        run: (invocation) => router.run(invocation),
        // The other bots answer only their own commands: anything else is unknown there.
        everyBot: {
          definitions: everyBot.map((c) => c.definition),
          run: (invocation) => (everyBot.some((c) => c.definition.name === invocation.name) ? router.run(invocation) : Promise.resolve(`Unknown command /${invocation.name}.`)),
        },
      },
    },
  };
}
