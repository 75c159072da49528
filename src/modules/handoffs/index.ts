import { defineModule } from '../contract.js';
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
export const handoffsModule = defineModule<{ handoffs: HandoffService }>({
  name: 'handoffs',
  migrations: ['2026-11-30T09-10-00_handoffs', '2026-12-02T08-30-00_handoff-catchup'],
  tools: handoffTools,
  start: async (services) => (await import('./handoffs.module.js')).startHandoffs(services),
});
