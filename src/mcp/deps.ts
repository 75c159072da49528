import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { BridgeClient, BridgeResult } from '../client/bridge-client.js';
import { text } from '../platform/mcp/tool.js';
import type { McpState } from './state.js';

/** What `herald mcp` hands every tool: the bridge (over HTTP), its local state, its limits. */
export interface McpServerDeps {
  bridge: BridgeClient;
  state: McpState;
  /** How long a sending tool waits for delivered/failed. */
  waitMs: number;
  log: Logger;
}

/** A refusal from the bridge, in words an agent can act on. */
export function bridgeError(r: BridgeResult<unknown> & { ok: false }): CallToolResult {
  if (r.status === 0) return text('Herald could not be reached; try again later.', true);
  if (r.status === 401 || (r.status === 503 && r.error !== 'store unavailable')) {
    return text(`Herald refused this MCP server's credentials (${r.error}); the operator must set MCP_BRIDGE_TOKEN for both.`, true);
  }
  return text(`Herald refused the request: ${r.error}.`, true);
}
