import { deliveriesModule } from '../deliveries/index.js';
import { identityModule } from '../identity/index.js';
import { destinationsModule } from '../destinations/index.js';
import { handoffsModule } from '../handoffs/index.js';
import { defineModule, ownTables } from '../contract.js';
import { readInboxSettings, type InboxSettings } from './settings.js';
import type { InboxDb } from './inbox.table.js';
import type { InboxService } from './inbox.service.js';
import { inboxTools } from './inbox.tools.js';

export type { InboxService } from './inbox.service.js';

/**
 * The inbound inbox: what the agent hears on the home platform (mentions of its bot, registered
 * users' DMs, replies to and reactions on Herald's messages, listened channels, handoffs), stored
 * once each, pulled with a cursor (`/mcp/inbox`) or pushed to the operator's webhook.
 */
export const inboxModule = defineModule<{ inbox: InboxService }, undefined, InboxSettings, InboxDb>({
  name: 'inbox',
  needs: { modules: [deliveriesModule, identityModule, destinationsModule, handoffsModule] },
  tables: ownTables<InboxDb>(),
  config: readInboxSettings,
  tools: inboxTools,
  start: async (services) => (await import('./inbox.module.js')).startInbox(services),
});
