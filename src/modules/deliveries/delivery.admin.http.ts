import type { Context as KoaContext } from 'koa';
import type { OperationHandlers } from '../../infra/http/api.js';
import { reply } from '../../infra/http/reply.js';
import type { Platform } from '../../platforms/platform.js';
import type { DeliveryService } from './delivery.service.js';

export interface DeliveryAdminOptions {
  /**
   * Where people open messages, when not on the platform itself: in sandbox mode the sandbox's
   * origin, where the platform's links open its own messages. The protocol's url stays the platform's.
   */
  messageLinkBase?: string | undefined;
  /** The identity a bridge caller speaks as (policy.middleware.ts identityOf): it sees that identity's deliveries only. */
  speaker?: ((koa: KoaContext) => string) | undefined;
}

/** The admin API's view of deliveries: why one failed or is unknown, without its body. */
export function deliveryAdminOperations(deliveries: DeliveryService, platforms: readonly Pick<Platform, 'messageLink'>[], options: DeliveryAdminOptions = {}): OperationHandlers {
  return () => ({
    getDeliveryDetail: async (c, _body, koa) => {
      // The operator (admin token) sees every identity's; a bridge caller its own identity's only.
      const identity = koa !== undefined && koa.state['authenticated'] === 'bridge' ? options.speaker?.(koa) : undefined;
      const detail = await deliveries.detail(String(c.request.params['request_id']), identity);
      // Where a person opens it: the platform whose link the url is says (none: no link).
      const url = detail.url;
      const link = url === undefined ? undefined : platforms.map((p) => p.messageLink?.(url, options.messageLinkBase)).find((l) => l !== undefined);
      if (link !== undefined) detail.link = link;
      return reply('getDeliveryDetail', 200, detail);
    },
  });
}
