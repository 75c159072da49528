import { deliveriesModule } from '../deliveries/index.js';
import { destinationsModule } from '../destinations/index.js';
import { defineModule, ownTables } from '../contract.js';
import { readHandoffLimits, type HandoffLimits } from './settings.js';
import type { HandoffsDb } from './handoff.table.js';
import type { HandoffService } from './handoff.service.js';
import { handoffTools } from './handoff.tools.js';

export type { HandoffService } from './handoff.service.js';
export type { HandoffInboxRow } from './handoff.table.js';
/** The event announcing that a handoff arrived in the handoff inbox (on any replica). */
export const HANDOFF_ARRIVED = 'handoffs.arrived';

/**
 * Bot-to-bot handoffs: sent as deliveries (kind handoff), received from the home platform's
 * inbound messages while some bot is trusted.
 */
export const handoffsModule = defineModule<{ handoffs: HandoffService }, undefined, HandoffLimits, HandoffsDb>({
  name: 'handoffs',
  needs: { modules: [deliveriesModule, destinationsModule] },
  tables: ownTables<HandoffsDb>(),
  config: readHandoffLimits,
  tools: handoffTools,
  start: async (services) => (await import('./handoffs.module.js')).startHandoffs(services),
});
