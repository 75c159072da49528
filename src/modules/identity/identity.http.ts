import { NotFoundError } from '../../infra/errors.js';
import type { OperationHandlers } from '../../infra/http/api.js';
import { FailureThrottle } from '../../infra/http/auth.js';
import type { Context as KoaContext } from 'koa';
import { principalOf } from '../../infra/http/policy.middleware.js';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import { errorReply, reply } from '../../infra/http/reply.js';
import type { IdentityMetrics } from './identity.metrics.js';
import type { IdentityService } from './identity.service.js';

/**
 * Recipients, pairing-code redemption and registration lookups, each with the bot the caller speaks
 * as (`speaker`: policy.middleware.ts identityOf): registrations, codes and pairings are per bot.
 */
export function identityOperations(identity: IdentityService, metrics?: IdentityMetrics, speaker: (koa: KoaContext | undefined) => string = () => DEFAULT_IDENTITY): OperationHandlers {
  return (kit) => {
    const redeemThrottle = new FailureThrottle();
    return {
      listRecipients: async (_c, _body, koa) => reply('listRecipients', 200, await identity.recipients(speaker(koa))),
      redeemPairingCode: async (_c, body, koa) => {
        kit.checkBody('redeemPairingCode', body);
        try {
          return reply('redeemPairingCode', 200, await identity.redeem((body as { code: string }).code, principalOf(koa), speaker(koa)));
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
          return reply('getPairing', 200, await identity.pairing(principalOf(koa), speaker(koa)));
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
          return reply('getPairing', 404, { error: 'not paired' });
        }
      },
      getRegistration: async (c, _body, koa) => reply('getRegistration', 200, await identity.registration(String(c.request.params['user_id']), speaker(koa))),
    };
  };
}
