import type { NonceLedger } from '../../transports/transport.js';
import { defineModule } from '../contract.js';
import type { DeliveryMetrics } from './delivery.metrics.js';
import type { Deliveries } from './deliveries.module.js';
import { deliveryTools } from './delivery.tools.js';

export { DESTINATIONS, RETENTION_MS, wireStatus, type Destination, type HandoffTarget } from './delivery.js';
export type { DeliveryService, KindSupport } from './delivery.service.js';
export type { Deliveries } from './deliveries.module.js';
export type { DeliveryRow } from './delivery.table.js';
export { facet, type DeliveryPorts, type SelfSendContext, type SelfSendingKind, type SelfSentOutcome, type SendKind } from './send-kind.js';
export { payloadHash, type ChatTarget, type ReplyTarget } from './delivery.js';

/** How long a platform's report of its own message waits for an unreachable database before it is dropped. */
const OWN_MESSAGE_RETRY_MS = 60_000;

/**
 * Posts, DMs, edits, command replies, handoffs and chat sends: accepted into one outbox and sent exactly once
 * by the job runner.
 */
export const deliveriesModule = defineModule<Deliveries, DeliveryMetrics>({
  name: 'deliveries',
  migrations: ['2026-11-29T19-30-00_bridge-core', '2026-11-30T04-00-00_in-doubt', '2026-11-30T05-00-00_addresses', '2026-11-30T06-30-00_outbox-health', '2026-11-30T08-30-00_reply-kind', '2026-12-02T12-20-00_message-ops-kinds'],
  tools: deliveryTools,
  metrics: async (registry) => new (await import('./delivery.metrics.js')).DeliveryMetrics(registry),
  start: async (services, metrics) => (await import('./deliveries.module.js')).startDeliveries(services, metrics),
});

/**
 * The ledger of what each send key created, as the platforms report it (Discord's gateway nonces,
 * IRC's labeled echoes): reconciliation reads it when an answer was lost.
 */
export function ownMessageLedger(db: import('kysely').Kysely<import('./delivery.table.js').DeliveriesDb>): NonceLedger & { record(key: string, channelId: string, messageId: string, at: Date): Promise<void> } {
  const repository = import('./delivery.repository.js');
  return {
    record: async (key, channelId, messageId, at) => {
      const [{ recordSentMessage }, { retryWhileUnreachable }] = await Promise.all([repository, import('../../platform/db/database.js')]);
      await retryWhileUnreachable(() => recordSentMessage(db, key, channelId, messageId, at), OWN_MESSAGE_RETRY_MS);
    },
    find: async (key) => (await repository).nonceLedger(db).find(key),
    noncesOf: async (messageIds) => (await repository).nonceLedger(db).noncesOf(messageIds),
  };
}
