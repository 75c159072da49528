import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Logger } from 'pino';
import { createBridgeClient } from '../client/bridge-client.js';
import type { Config } from '../config.js';
import { isAuthorized } from '../platform/http/auth.js';
import { createMcpServer, type McpServerDeps } from './server.js';
import { McpState } from './state.js';
import { errorSummary } from '../platform/errors.js';
import { listenProblem } from '../platform/startup.js';

/** How long a call retries a bridge this server has not reached yet (or found down last time). */
const UNREACHABLE_RETRY_MS = 2_000;

/** Labels this server's calls in the archive's action log. */
const MCP_CLIENT = { 'x-herald-client': 'mcp' };

async function deps(config: Config, bridgeToken: string, log: Logger): Promise<McpServerDeps> {
  return {
    // Retries ride out a restart of a bridge that was answering: for as long as a tool waits for its
    // outcome, at least 30 s. A bridge not reached yet, or down at the last try, is said at once.
    bridge: createBridgeClient({
      baseUrl: config.heraldUrl,
      token: bridgeToken,
      backoffMs: 250,
      retryForMs: Math.max(30_000, config.mcpWaitMs),
      unreachableRetryForMs: UNREACHABLE_RETRY_MS,
      headers: MCP_CLIENT,
    }),
    // The media archive's admin tier, only when the operator gave this server the admin token too.
    admin: config.adminToken === undefined ? undefined : createBridgeClient({ baseUrl: config.heraldUrl, token: config.adminToken, headers: MCP_CLIENT }),
    state: await McpState.open(config.mcpStatePath),
    waitMs: config.mcpWaitMs,
    log,
  };
}

/** `herald mcp`: MCP over stdio (stdout is the protocol; logs go to stderr). */
export async function runStdio(config: Config, bridgeToken: string, log: Logger): Promise<void> {
  const server = createMcpServer(await deps(config, bridgeToken, log));
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => (transport.onclose = resolve));
  await server.connect(transport);
  log.info({ bridge: config.heraldUrl }, 'herald mcp serving on stdio');
  await closed;
}

/**
 * `herald mcp --http`: MCP over Streamable HTTP at /mcp, stateless (each request gets its own
 * transport), behind a bearer token, on loopback unless HOST says otherwise.
 */
export async function startHttp(config: Config, bridgeToken: string, mcpToken: string, log: Logger): Promise<{ url: string; server: HttpServer }> {
  const shared = await deps(config, bridgeToken, log);
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/mcp') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    if (!isAuthorized(req.headers.authorization, mcpToken)) {
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' }).end('{"error":"unauthorized"}');
      return;
    }
    const mcp = createMcpServer(shared);
    // No sessionIdGenerator: stateless mode.
    const transport = new StreamableHTTPServerTransport({});
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    mcp
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch((err: unknown) => {
        log.error({ err: errorSummary(err) }, 'mcp request failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"internal error"}');
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(listenProblem(err, config.host, config.mcpPort, 'HERALD_MCP_PORT') ?? err));
    server.listen(config.mcpPort, config.host, () => resolve());
  });
  const url = `http://${config.host}:${(server.address() as AddressInfo).port}/mcp`;
  log.info({ url, bridge: config.heraldUrl }, 'herald mcp serving Streamable HTTP');
  return { url, server };
}
