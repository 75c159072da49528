import type { OperationHandlers } from '../../infra/http/api.js';
import { principalOf } from '../../infra/http/policy.middleware.js';
import { reply } from '../../infra/http/reply.js';
import type { AgentRecordsStore, ImportedRecords } from './agent-records.js';

/**
 * `/mcp/records/`: `herald mcp`'s records of what each caller sent, in the store (openapi/records.yaml).
 * Each operation reads and writes the caller's own (principalOf): another's are invisible.
 */
export function agentRecordOperations(records: AgentRecordsStore): OperationHandlers {
  return () => {
    const id = (c: { request: { params: Record<string, unknown> } }): string => String(c.request.params['request_id']);
    return {
      getAgentMessage: async (c, _body, koa) => {
        const m = await records.message(principalOf(koa), id(c));
        return m === undefined ? reply('getAgentMessage', 404, { error: 'no such message' }) : reply('getAgentMessage', 200, m);
      },
      rememberAgentMessage: async (c, body, koa) => reply('rememberAgentMessage', 200, await records.remember(principalOf(koa), id(c), (body as { kind: 'post' | 'dm' }).kind)),
      nextAgentEditSeq: async (c, body, koa) => {
        const seq = await records.nextSeq(principalOf(koa), id(c), (body as { edit_id?: string }).edit_id);
        return seq === undefined ? reply('nextAgentEditSeq', 404, { error: 'no such message' }) : reply('nextAgentEditSeq', 200, { seq });
      },
      getAgentOwnership: async (c, _body, koa) => reply('getAgentOwnership', 200, { owned: await records.owns(principalOf(koa), id(c)) }),
      claimAgentRequest: async (c, _body, koa) => reply('claimAgentRequest', 200, { claimed_before: await records.claim(principalOf(koa), id(c)) }),
      releaseAgentRequest: async (c, _body, koa) => {
        await records.release(principalOf(koa), id(c));
        return { status: 204 };
      },
      importAgentRecords: async (_c, body, koa) => reply('importAgentRecords', 200, await records.import(principalOf(koa), body as ImportedRecords)),
    };
  };
}
