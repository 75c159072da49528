import { defineModule } from '../contract.js';
import type { InboxService } from './inbox.service.js';
import { inboxTools } from './inbox.tools.js';

export type { InboxService } from './inbox.service.js';

/**
 * The inbound inbox: what the agent hears on the home platform (mentions of its bot, registered
 * users' DMs, replies to and reactions on Herald's messages, listened channels, handoffs), stored
 * once each, pulled with a cursor (`/mcp/inbox`) or pushed to the operator's webhook.
 */
export const inboxModule = defineModule<{ inbox: InboxService }>({
  name: 'inbox',
  migrations: ['2026-12-02T12-30-00_inbox'],
  tools: inboxTools,
  start: async (services) => (await import('./inbox.module.js')).startInbox(services),
});
