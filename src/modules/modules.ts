import { archiveModule } from './archive/index.js';
import { chatModule } from './chat/index.js';
import { commandsModule } from './commands/index.js';
import type { Command, HeraldModule } from './contract.js';
import { deliveriesModule } from './deliveries/index.js';
import { destinationsModule } from './destinations/index.js';
import { filesModule } from './files/index.js';
import { handoffsModule } from './handoffs/index.js';
import { identityModule } from './identity/index.js';
import { inboxModule } from './inbox/index.js';

/**
 * Every capability Herald has, one line each, started in this order (a module may use only what
 * the ones above it give; commands run against their own module, whenever it started). A capability is a folder of src/modules/ whose index.ts exports its
 * definition (src/modules/contract.ts).
 */
export const MODULES = [
  deliveriesModule,
  identityModule,
  destinationsModule,
  commandsModule,
  handoffsModule,
  archiveModule,
  chatModule,
  filesModule,
  inboxModule,
] as const satisfies readonly HeraldModule[];

/** Every command, from the modules that declare them: slash-command registration and the MCP manifest are built from it. */
export async function allCommands(): Promise<Command<unknown>[]> {
  return (await Promise.all(MODULES.map((m) => m.commands?.() ?? []))).flat() as Command<unknown>[];
}
