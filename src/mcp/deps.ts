import type { Logger } from 'pino';
import type { BridgeClient } from '../client/bridge-client.js';
import type { LocalFiles } from '../modules/deliveries/delivery.tool-files.js';
import type { AgentRecords } from './state.js';

/** What `herald mcp` hands every tool: the bridge (over HTTP), its local state, its limits. */
export interface McpServerDeps {
  bridge: BridgeClient;
  /** With HERALD_ADMIN_TOKEN set for `herald mcp`: the admin tier (download scrapes, deletes). */
  admin?: BridgeClient | undefined;
  /** The caller's own records (stdio and the static token: the connector's; an OAuth client: its own). */
  state: AgentRecords;
  /** How long a sending tool waits for delivered/failed. */
  waitMs: number;
  log: Logger;
  /**
   * Which `files: [{path}]` the sending tools may read: a path is the local user's word. stdio: any;
   * HTTP: inside HERALD_MCP_FILES_DIR, else none. Unset: none.
   */
  localFiles?: LocalFiles | undefined;
  /**
   * Aborts when the MCP client that made this call went away (a cut stream): the wait tools end
   * their long poll on Herald with it. Write tools never pass it on: their work is finished either
   * way, so a re-issue is answered as a replay.
   */
  signal?: AbortSignal | undefined;
}
