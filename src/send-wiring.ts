import type { Kysely } from 'kysely';
import { replySendKind } from './modules/commands/reply.kind.js';
import type { DeliveryJobs } from './modules/deliveries/delivery.jobs.js';
import type { DeliveryPorts } from './modules/deliveries/send-kind.js';
import { findDestinationAddress } from './modules/destinations/destination.repository.js';
import { handoffSendKind } from './modules/handoffs/handoff.kind.js';
import { findRegistration } from './modules/identity/identity.repository.js';
import type { Database } from './schema.js';

/**
 * Wiring of the send engine (used by src/app.ts and the tests' service harness): the ports the
 * deliveries engine asks through, answered by the destinations and identity modules, and the send
 * kinds other modules own. Part of the wiring floor: it alone knows both sides.
 */
export function deliveryPorts(db: Kysely<Database>): DeliveryPorts {
  return {
    resolveDestination: (guildId, destination) => findDestinationAddress(db, guildId, destination),
    isRegistered: async (userId) => (await findRegistration(db, userId)) !== undefined,
  };
}

/** Declare the send kinds owned by modules other than deliveries. */
export function declareSendKinds(jobs: DeliveryJobs): DeliveryJobs {
  return jobs.declare(replySendKind).declare(handoffSendKind);
}
