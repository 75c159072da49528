import { Client, StreamableHTTPClientTransport, type Transport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { distIsFresh } from './process.js';

/**
 * Clients of the v2 MCP SDK (@modelcontextprotocol/client) for tests, pinned to the 2026-07-28
 * revision (stateless: no handshake, each request carries its version in `_meta`), in a file of
 * their own so only the tests that speak it load it. test/support/mcp.ts has the 1.x client's.
 */

export const MODERN_REVISION = '2026-07-28';

/** A v2 client called `name`, on 2026-07-28 over `transport` (connecting fails if the server does not offer it). */
export async function modernClient(name: string, transport: Transport): Promise<Client> {
  const client = new Client({ name, version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN_REVISION } } });
  await client.connect(transport);
  return client;
}

/** `herald mcp` over stdio, started by a v2 client speaking 2026-07-28 (closing the client ends the process). */
export function modernOverStdio(name: string, env: Record<string, string>): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: distIsFresh() ? ['bin/herald.js', 'mcp'] : ['--import', 'tsx', 'src/cli.ts', 'mcp'],
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', LOG_LEVEL: 'warn', ...env },
    stderr: 'pipe',
  });
  return modernClient(name, transport);
}

/** Herald's MCP server over Streamable HTTP at `url`, with its bearer token, from a v2 client speaking 2026-07-28. */
export function modernOverHttp(name: string, url: string, token: string): Promise<Client> {
  return modernClient(name, new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
}
