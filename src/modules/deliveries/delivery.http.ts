import type { OperationHandlers } from '../../platform/http/api.js';
import { reply } from '../../platform/http/reply.js';
import { DESTINATIONS } from './delivery.js';
import type { DeliveryService, KindSupport } from './delivery.service.js';
import { DeliveryRequestValidator } from './delivery.validation.js';

/** The bridge protocol's delivery operations: capabilities, accept, state. */
export function deliveryOperations(deliveries: DeliveryService, capabilities: KindSupport): OperationHandlers {
  return (kit) => {
    const validator = new DeliveryRequestValidator(kit.schemas, kit.reasons);
    return {
      getCapabilities: () =>
        reply('getCapabilities', 200, {
          dm: capabilities.dm,
          targeted_post: capabilities.post,
          cards: capabilities.post,
          edit: capabilities.edit,
          destinations: DESTINATIONS.map((d) => ({ destination: d.destination, description: d.description })),
        }),
      createDelivery: async (_c, body) => {
        const accepted = await deliveries.accept(validator.validate(body));
        return reply('createDelivery', 202, { state: accepted.state, existing: accepted.existing });
      },
      getDelivery: async (c) => reply('getDelivery', 200, await deliveries.get(String(c.request.params['request_id']))),
    };
  };
}
