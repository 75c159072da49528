import { NotFoundError } from '../../infra/errors.js';
import type { OperationHandlers } from '../../infra/http/api.js';
import { FailureThrottle } from '../../infra/http/auth.js';
import { principalOf } from '../../infra/http/policy.middleware.js';
import { errorReply, reply } from '../../infra/http/reply.js';
import type { IdentityMetrics } from './identity.metrics.js';
import type { IdentityService } from './identity.service.js';

/** Recipients, pairing-code redemption and registration lookups. */
export function identityOperations(identity: IdentityService, metrics?: IdentityMetrics): OperationHandlers {
  return (kit) => {
    const redeemThrottle = new FailureThrottle();
    return {
      listRecipients: async () => reply('listRecipients', 200, await identity.recipients()),
      redeemPairingCode: async (_c, body, koa) => {
        kit.checkBody('redeemPairingCode', body);
        try {
          return reply('redeemPairingCode', 200, await identity.redeem((body as { code: string }).code, principalOf(koa)));
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
          // Guessing codes is throttled per address; a valid code is never refused.
          const verdict = redeemThrottle.fail(koa.ip);
          metrics?.redeemFailed(verdict.limited);
          if (verdict.limited) return errorReply<'TooManyFailedAttempts'>(429, { error: 'too many failed attempts' }, { 'Retry-After': String(verdict.retryAfterSeconds) });
          return reply('redeemPairingCode', 404, { error: 'invalid or expired code' });
        }
      },
      getPairing: async (_c, _body, koa) => {
        try {
          return reply('getPairing', 200, await identity.pairing(principalOf(koa)));
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
          return reply('getPairing', 404, { error: 'not paired' });
        }
      },
      getRegistration: async (c) => reply('getRegistration', 200, await identity.registration(String(c.request.params['user_id']))),
    };
  };
}
