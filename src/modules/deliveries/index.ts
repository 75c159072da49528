import { retryWhileUnreachable } from '../../platform/db/database.js';
import { capabilitiesOf } from '../../transports/transport.js';
import { defineModule } from '../contract.js';
import { deliveryAdminOperations } from './delivery.admin.http.js';
import { deliveryOperations } from './delivery.http.js';
import { DeliveryJobs, deliveryQueue } from './delivery.jobs.js';
import { DeliveryMetrics } from './delivery.metrics.js';
import { recordSentMessage } from './delivery.repository.js';
import { DeliveryService, type KindSupport } from './delivery.service.js';
import { deliveryTools } from './delivery.tools.js';

export { DESTINATIONS, RETENTION_MS, type Destination, type HandoffTarget } from './delivery.js';
export { wireStatus, type DeliveryService, type KindSupport } from './delivery.service.js';
export type { DeliveryRow } from './delivery.table.js';

/** How long a platform's report of its own message waits for an unreachable database before it is dropped. */
const OWN_MESSAGE_RETRY_MS = 60_000;

/** What the deliveries module gives the others. */
export interface Deliveries {
  readonly deliveries: DeliveryService;
  /** Which kinds this bridge accepts (the protocol's capabilities). */
  readonly capabilities: KindSupport;
}

/**
 * Posts, DMs, edits, command replies and handoffs: accepted into one outbox and sent exactly once
 * by the job runner.
 */
export const deliveriesModule = defineModule<Deliveries, DeliveryMetrics>({
  name: 'deliveries',
  migrations: ['2026-11-29T19-30-00_bridge-core', '2026-11-30T04-00-00_in-doubt', '2026-11-30T05-00-00_addresses', '2026-11-30T06-30-00_outbox-health', '2026-11-30T08-30-00_reply-kind'],
  tools: deliveryTools,
  metrics: (registry) => new DeliveryMetrics(registry),
  async start({ config, store, db, clock, log, transports, doorbell, site }, metrics) {
    // The protocol's capabilities (and the MCP tools, through them) come from what the home platform can do.
    const can = capabilitiesOf(transports.home);
    const capabilities: KindSupport = {
      post: can.send,
      dm: can.dm && !config.disabledKinds.includes('dm'),
      edit: can.edit && !config.disabledKinds.includes('edit'),
    };
    const deliveries = new DeliveryService(db, clock, capabilities, {
      announce: () => doorbell.ring(),
      // PGlite is one session: one statement at a time whatever we do.
      maxInFlight: store.kind === 'postgres' ? Math.max(1, Math.floor(config.dbPoolSize / 4)) : 1,
    });
    const queue = deliveryQueue(db, metrics);
    const jobs = new DeliveryJobs(db, transports, clock, log, metrics, {
      nonceWindowMs: config.nonceWindowMs,
      maxAttempts: config.maxAttempts,
      retryBaseMs: config.retryBaseMs,
      leaseMs: config.leaseMs,
    });
    return {
      gives: { deliveries, capabilities },
      operations: [deliveryOperations(deliveries, capabilities, metrics), deliveryAdminOperations(deliveries, site.messageLinkBase !== undefined ? { messageLinkBase: site.messageLinkBase } : {})],
      jobs: [{ queue, kinds: jobs.kinds(), prune: true, report: true, listen: true }],
    };
  },
});

/**
 * The ledger of what each send key created, as the platforms report it (Discord's gateway nonces,
 * IRC's labeled echoes): reconciliation reads it when an answer was lost.
 */
export function ownMessageLedger(db: Parameters<typeof recordSentMessage>[0]): (key: string, channelId: string, messageId: string, at: Date) => Promise<void> {
  return (key, channelId, messageId, at) => retryWhileUnreachable(() => recordSentMessage(db, key, channelId, messageId, at), OWN_MESSAGE_RETRY_MS);
}
