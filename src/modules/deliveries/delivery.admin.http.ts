import type { OperationHandlers } from '../../platform/http/api.js';
import { reply } from '../../platform/http/reply.js';
import type { DeliveryService } from './delivery.service.js';

const DISCORD_WEB = 'https://discord.com';

export interface DeliveryAdminOptions {
  /**
   * Where people open messages, when not on Discord: in sandbox mode the sandbox's origin, whose
   * `/channels/…` paths open its own messages. The protocol's url stays Discord's.
   */
  messageLinkBase?: string | undefined;
}

/** The admin API's view of deliveries: why one failed or is unknown, without its body. */
export function deliveryAdminOperations(deliveries: DeliveryService, options: DeliveryAdminOptions = {}): OperationHandlers {
  const base = options.messageLinkBase ?? DISCORD_WEB;
  return () => ({
    getDeliveryDetail: async (c) => {
      const detail = await deliveries.detail(String(c.request.params['request_id']));
      if (detail.url?.startsWith(`${DISCORD_WEB}/`)) detail.link = base + detail.url.slice(DISCORD_WEB.length);
      return reply('getDeliveryDetail', 200, detail);
    },
  });
}
