import type { Context as KoaContext } from 'koa';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import type { components } from '../../../generated/api.js';
import type { OperationHandlers } from '../../infra/http/api.js';
import { reply } from '../../infra/http/reply.js';
import { DESTINATIONS, type Delivery } from './delivery.js';
import type { DeliveryMetrics } from './delivery.metrics.js';
import type { DeliveryService, KindSupport } from './delivery.service.js';
import { DeliveryRequestValidator } from './delivery.validation.js';

/** The bridge protocol's delivery operations: capabilities, accept, state. */
/** One platform's line in `GET /mcp/capabilities?include=platforms`. */
export type PlatformCapabilities = components['schemas']['PlatformCapabilities'];

/**
 * `speaker`: the identity a caller speaks as (policy.middleware.ts identityOf): its deliveries are
 * sent as it, and only its own are found.
 */
export function deliveryOperations(
  deliveries: DeliveryService,
  capabilities: KindSupport,
  metrics?: DeliveryMetrics,
  platforms: readonly PlatformCapabilities[] = [],
  checkAttachments?: (delivery: Delivery, identity: string) => Promise<void>,
  speaker: (koa: KoaContext | undefined) => string = () => DEFAULT_IDENTITY,
): OperationHandlers {
  return (kit) => {
    const validator = new DeliveryRequestValidator(kit.schemas, kit.reasons);
    return {
      getCapabilities: (c) =>
        reply('getCapabilities', 200, {
          dm: capabilities.dm,
          targeted_post: capabilities.post,
          cards: capabilities.post,
          edit: capabilities.edit,
          destinations: DESTINATIONS.map((d) => ({ destination: d.destination, description: d.description })),
          // Only when asked: the plain answer stays byte for byte what connectors have always read.
          ...(c.request.query['include'] === 'platforms' ? { platforms: platforms.map((p) => ({ ...p })) } : {}),
        }),
      createDelivery: async (_c, body, koa) => {
        const delivery = validator.validate(body);
        // Files out: every attached file stored and within the platform's limits, before anything is queued.
        if (delivery.body.attachments !== undefined) await checkAttachments?.(delivery, speaker(koa));
        const accepted = await deliveries.accept(delivery, speaker(koa));
        if (!accepted.existing) {
          metrics?.accept(delivery.kind);
          // A kind this bridge cannot deliver fails at once, without a dispatcher.
          if (accepted.state.state === 'failed') metrics?.finish(delivery.kind, 'failed', accepted.state.code, speaker(koa));
        }
        if (accepted.redriven) metrics?.redrive(delivery.kind);
        return reply('createDelivery', 202, { state: accepted.state, existing: accepted.existing });
      },
      getDelivery: async (c, _body, koa) => reply('getDelivery', 200, await deliveries.get(String(c.request.params['request_id']), speaker(koa))),
    };
  };
}
