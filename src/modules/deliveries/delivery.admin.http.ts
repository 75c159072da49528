import type { OperationHandlers } from '../../platform/http/api.js';
import { reply } from '../../platform/http/reply.js';
import type { DeliveryService } from './delivery.service.js';

/** The admin API's view of deliveries: why one failed or is unknown, without its body. */
export function deliveryAdminOperations(deliveries: DeliveryService): OperationHandlers {
  return () => ({
    getDeliveryDetail: async (c) => reply('getDeliveryDetail', 200, await deliveries.detail(String(c.request.params['request_id']))),
  });
}
