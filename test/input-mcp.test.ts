import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBridgeClient } from '../src/client/bridge-client.js';
import { createMcpServer } from '../src/mcp/server.js';
import { storeRecords } from '../src/mcp/state.js';
import { mcpTools } from '../src/mcp/tools.js';
import { createLogger } from '../src/infra/log.js';
import { callTool, mcpClient } from './support/mcp.js';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The one input gate holds for every MCP tool, those added later too: text no store can hold
 * (U+0000, a lone surrogate) in any string argument, or in an argument's name, is refused naming
 * it before the tool runs. The tools' bridge is a server that counts requests: a tool that ran
 * would have asked it something.
 */

/** Every string argument a tool's input schema describes (an array's items as `name[]`), by dotted place. */
function stringArguments(schema: Record<string, unknown>, at: string[] = []): string[][] {
  if (schema['type'] === 'string') return [at];
  const items = schema['items'];
  if (schema['type'] === 'array' && typeof items === 'object' && items !== null) return stringArguments(items as Record<string, unknown>, [...at.slice(0, -1), `${at.at(-1) ?? ''}[]`]);
  const properties = (schema['properties'] ?? {}) as Record<string, Record<string, unknown>>;
  return Object.entries(properties).flatMap(([k, child]) => stringArguments(child, [...at, k]));
}

/** Arguments holding `value` at `place`. */
function argumentsWith(place: string[], value: string): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  let node = root;
  for (const [i, key] of place.entries()) {
    const last = i === place.length - 1;
    const name = key.replace(/\[\]$/, '');
    const child: unknown = last ? value : {};
    node[name] = key.endsWith('[]') ? [child] : child;
    if (!last) node = child as Record<string, unknown>;
  }
  return root;
}

describe('every MCP tool refuses text no store can hold, naming the argument', () => {
  let client: Client;
  let stateDir: string;
  let asked = 0;
  const bridge = createServer((_req: IncomingMessage, res: ServerResponse) => {
    asked += 1;
    res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"internal error"}');
  });

  beforeAll(async () => {
    await new Promise<void>((resolve) => bridge.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(bridge.address() as AddressInfo).port}`;
    stateDir = await mkdtemp(path.join(tmpdir(), 'herald-input-mcp-'));
    const server = createMcpServer({
      bridge: createBridgeClient({ baseUrl: url, token: 't'.repeat(43) }),
      admin: createBridgeClient({ baseUrl: url, token: 'a'.repeat(43) }),
      state: storeRecords(createBridgeClient({ baseUrl: url, token: 't'.repeat(43) }), 'connector'),
      waitMs: 1_000,
      log: createLogger('silent'),
    });
    const [a, b] = InMemoryTransport.createLinkedPair();
    await server.connect(a);
    client = await mcpClient('input-gate', b);
  });
  afterAll(async () => {
    await client.close();
    await new Promise((resolve) => bridge.close(resolve));
    await rm(stateDir, { recursive: true, force: true });
  });

  it('NUL, a lone high or a lone low surrogate in any string argument of any tool, or in an argument name: an error naming it, and the tool never runs', async () => {
    const wrong: string[] = [];
    let cases = 0;
    for (const tool of mcpTools()) {
      const places: [string[], string][] = [
        ...stringArguments(tool.inputSchema).map((place): [string[], string] => [place, (place[0] ?? '').replace(/\[\]$/, '')]),
        [['k\u0000'], "an argument's name"],
        [['k\ud800'], "an argument's name"],
      ];
      for (const [place, named] of places) {
        for (const bad of ['a\u0000b', '#a\ud800', '\udc00b']) {
          cases += 1;
          const r = await callTool(client, tool.name, argumentsWith(place, bad));
          if (!r.isError || !r.text.startsWith('Invalid arguments: ') || !r.text.includes(named) || !/must not contain (NUL|a lone surrogate)/.test(r.text)) wrong.push(`${tool.name} ${place.join('.')}: ${r.text.slice(0, 160)}`);
        }
      }
    }
    expect(wrong).toEqual([]);
    // Every tool was walked, and none of them asked the bridge anything.
    expect(cases).toBeGreaterThan(mcpTools().length * 6);
    expect(asked).toBe(0);
  });
});
