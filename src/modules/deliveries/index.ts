import type { NonceLedger } from '../../platforms/platform.js';
import { defineModule, ownTables } from '../contract.js';
import type { DeliveriesDb } from './delivery.table.js';
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
export const deliveriesModule = defineModule<Deliveries, DeliveryMetrics, undefined, DeliveriesDb>({
  name: 'deliveries',
  needs: { ports: ['resolveDestination', 'isRegistered', 'registeredOn'] },
  tables: ownTables<DeliveriesDb>(),
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
      const [{ recordSentMessage }, { retryWhileUnreachable }] = await Promise.all([repository, import('../../infra/db/database.js')]);
      await retryWhileUnreachable(() => recordSentMessage(db, key, channelId, messageId, at), OWN_MESSAGE_RETRY_MS);
    },
    find: async (key) => (await repository).nonceLedger(db).find(key),
    noncesOf: async (messageIds) => (await repository).nonceLedger(db).noncesOf(messageIds),
  };
}
