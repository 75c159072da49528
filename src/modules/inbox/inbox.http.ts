import type { Context as KoaContext } from 'koa';
import type { Context } from 'openapi-backend';
import { InvalidRequestError } from '../../infra/errors.js';
import type { OperationHandlers } from '../../infra/http/api.js';
import { POLICY_CLIENT_HEADER } from '../../infra/http/policy.middleware.js';
import { reply } from '../../infra/http/reply.js';
import type { InboxScope } from './inbox.scope.js';
import { MAX_WAIT_MS, type InboxService } from './inbox.service.js';

const DEFAULT_LIST_LIMIT = 50;

/**
 * Whose inbox a call reads, by the OAuth client `herald mcp --http` names (trusted from the bridge
 * token's caller only, as the policy trusts it); none: the connector's.
 */
export type ScopeOf = (client: string | undefined) => InboxScope;

/** The inbound inbox over the bridge: page, wait for the next event, move the cursor; each caller its own. */
export function inboxOperations(inbox: InboxService, scopeOf: ScopeOf): OperationHandlers {
  const scope = (koa: KoaContext): InboxScope => scopeOf(koa.state['authenticated'] === 'bridge' ? koa.get(POLICY_CLIENT_HEADER) || undefined : undefined);
  return () => ({
    listInbox: async (c, _body, koa) => {
      const limit = query(c, 'limit');
      return reply('listInbox', 200, await inbox.list(scope(koa), query(c, 'after'), limit === undefined ? DEFAULT_LIST_LIMIT : Number(limit)));
    },
    waitForInbox: async (c, _body, koa) => {
      const raw = query(c, 'timeout_ms');
      const timeoutMs = raw === undefined ? MAX_WAIT_MS : Number(raw);
      if (timeoutMs > MAX_WAIT_MS) throw new InvalidRequestError(`timeout_ms must be 0..${MAX_WAIT_MS}`);
      // A client that hangs up stops the wait.
      const gone = new AbortController();
      koa.res.once('close', () => gone.abort());
      return reply('waitForInbox', 200, { event: await inbox.next(scope(koa), query(c, 'after'), timeoutMs, gone.signal) });
    },
    ackInbox: async (_c, body, koa) => reply('ackInbox', 200, { cursor: await inbox.ack(scope(koa), (body as { cursor: string }).cursor) }),
  });
}

function query(c: Context, name: string): string | undefined {
  const v = c.request.query[name];
  return typeof v === 'string' ? v : undefined;
}
