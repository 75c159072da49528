import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { distIsFresh } from './process.js';

/**
 * MCP clients of Herald for tests, in a file of their own so that only the tests that speak MCP
 * load the MCP SDK (client.ts is imported by nearly every test).
 */

export type ToolResult = { content: { type: string; text: string }[]; isError?: boolean };

/** A tool result's text parts, one a line. */
export const toolText = (r: unknown): string => (r as ToolResult).content.map((c) => c.text).join('\n');

/** An MCP client called `name`, connected over `transport`. */
export async function mcpClient(name: string, transport: Transport): Promise<Client> {
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  return client;
}

/** `herald mcp` over stdio, as a desktop MCP client starts it (closing the client ends the process). */
export function mcpOverStdio(name: string, env: Record<string, string>): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: distIsFresh() ? ['bin/herald.js', 'mcp'] : ['--import', 'tsx', 'src/cli.ts', 'mcp'],
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', LOG_LEVEL: 'warn', ...env },
    stderr: 'pipe',
  });
  return mcpClient(name, transport);
}

/** Herald's MCP server over Streamable HTTP at `url`, with its bearer token. */
export function mcpOverHttp(name: string, url: string, token: string): Promise<Client> {
  return mcpClient(name, new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
}

/** Call a tool: its text, that text read as JSON (undefined when it is not JSON), and whether it is an error. */
export async function callTool(client: Client, name: string, args: Record<string, unknown> = {}): Promise<{ json: unknown; text: string; isError: boolean }> {
  const r = (await client.callTool({ name, arguments: args })) as ToolResult;
  const text = toolText(r);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { json, text, isError: r.isError === true };
}
