import type { Context } from 'openapi-backend';
import { InvalidRequestError } from '../../infra/errors.js';
import type { OperationHandlers } from '../../infra/http/api.js';
import { reply } from '../../infra/http/reply.js';
import { MAX_WAIT_MS, type HandoffRequest, type HandoffService } from './handoff.service.js';

const DEFAULT_LIST_LIMIT = 50;
const DEFAULT_WAIT_MS = 10_000;

/** Bot-to-bot handoffs over the bridge: send, a sent one's state, the inbox (list, wait, ack). */
export function handoffOperations(handoffs: HandoffService): OperationHandlers {
  return () => ({
    sendHandoff: async (_c, body) => {
      const b = body as HandoffRequest;
      // Only the keys the contract knows.
      const request: HandoffRequest = { request_id: b.request_id, target_bot_id: b.target_bot_id, channel_id: b.channel_id, text: b.text };
      if (b.in_thread !== undefined) request.in_thread = b.in_thread;
      if (b.origin_message_id !== undefined) request.origin_message_id = b.origin_message_id;
      if (b.expires_in_seconds !== undefined) request.expires_in_seconds = b.expires_in_seconds;
      return reply('sendHandoff', 202, await handoffs.send(request));
    },
    getHandoff: async (c) => reply('getHandoff', 200, await handoffs.get(String(c.request.params['request_id']))),
    listHandoffs: async (c) => {
      const limit = query(c, 'limit');
      return reply('listHandoffs', 200, await handoffs.list(query(c, 'after'), limit === undefined ? DEFAULT_LIST_LIMIT : Number(limit)));
    },
    waitForHandoff: async (c, _body, koa) => {
      const raw = query(c, 'timeout_ms');
      const timeoutMs = raw === undefined ? DEFAULT_WAIT_MS : Number(raw);
      if (timeoutMs > MAX_WAIT_MS) throw new InvalidRequestError(`timeout_ms must be 0..${MAX_WAIT_MS}`);
      // A client that hangs up stops the wait.
      const gone = new AbortController();
      koa.res.once('close', () => gone.abort());
      return reply('waitForHandoff', 200, { handoff: await handoffs.next(query(c, 'after'), timeoutMs, gone.signal) });
    },
    ackHandoffs: async (_c, body) => reply('ackHandoffs', 200, { acknowledged: await handoffs.ack((body as { ids: string[] }).ids) }),
  });
}

function query(c: Context, name: string): string | undefined {
  const v = c.request.query[name];
  return typeof v === 'string' ? v : undefined;
}
