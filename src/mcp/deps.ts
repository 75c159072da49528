import type { Logger } from 'pino';
import type { BridgeClient } from '../client/bridge-client.js';
import type { McpState } from './state.js';

/** What `herald mcp` hands every tool: the bridge (over HTTP), its local state, its limits. */
export interface McpServerDeps {
  bridge: BridgeClient;
  state: McpState;
  /** How long a sending tool waits for delivered/failed. */
  waitMs: number;
  log: Logger;
}
