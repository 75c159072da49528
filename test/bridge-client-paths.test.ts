import { describe, expect, it } from 'vitest';
import { createBridgeClient } from '../src/client/bridge-client.js';

// The generic client fills an operation's path from arguments an MCP agent controls (a scrape id,
// a request_id, a module's own ids): each value must stay the one segment its parameter names.
// No Herald runs here: the client's fetch only records where it would go.

const MODULE_DOC = {
  paths: {
    '/mcp/pins/{pin_id}': { get: { operationId: 'getPin' } },
    '/mcp/pins/{pin_id}/unpin': { post: { operationId: 'unpinPin' } },
  },
};

function recording() {
  const seen: string[] = [];
  const fetch = (async (request: Request) => {
    seen.push(`${request.method} ${new URL(request.url).pathname}${new URL(request.url).search}`);
    return new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } });
  }) as typeof globalThis.fetch;
  return { seen, bridge: createBridgeClient({ baseUrl: 'http://127.0.0.1:9', token: 't', fetch, retries: 0, contracts: [MODULE_DOC] }) };
}

describe('bridge.call / bridge.request path parameters', () => {
  it('sends /, ?, #, % and spaces escaped inside the one segment', async () => {
    const { seen, bridge } = recording();
    for (const v of ['a/b', '../x', 'a?x=1', 'a#f', '%2e%2e', '%2F', ' ']) await bridge.request('unpinPin', { path: { pin_id: v } });
    expect(seen).toEqual([
      'POST /mcp/pins/a%2Fb/unpin',
      'POST /mcp/pins/..%2Fx/unpin',
      'POST /mcp/pins/a%3Fx%3D1/unpin',
      'POST /mcp/pins/a%23f/unpin',
      'POST /mcp/pins/%252e%252e/unpin',
      'POST /mcp/pins/%252F/unpin',
      'POST /mcp/pins/%20/unpin',
    ]);
  });

  it('refuses ., .. and an empty value, which URL parsing would turn into another path (another operation)', async () => {
    const { seen, bridge } = recording();
    // Before: `..` reached POST /mcp/unpin, `.` POST /mcp/pins/unpin, '' GET /mcp/pins/, and getMediaScrape with `..` GET /admin/archive/.
    for (const v of ['..', '.', '']) {
      expect(await bridge.request('unpinPin', { path: { pin_id: v } })).toEqual({ ok: false, status: 400, error: 'path parameter pin_id must not be empty, . or ..' });
      expect(await bridge.request('getPin', { path: { pin_id: v } })).toEqual({ ok: false, status: 400, error: 'path parameter pin_id must not be empty, . or ..' });
      expect(await bridge.call('getMediaScrape', { path: { scrape_id: v } })).toEqual({ ok: false, status: 400, error: 'path parameter scrape_id must not be empty, . or ..' });
    }
    expect(seen).toEqual([]);
  });

  it('refuses a path parameter not given, rather than sending its template ({pin_id}) as the segment', async () => {
    const { seen, bridge } = recording();
    expect(await bridge.request('getPin', {})).toEqual({ ok: false, status: 400, error: 'path parameter pin_id is missing' });
    expect(await bridge.request('getPin', { path: { other: '1' } })).toEqual({ ok: false, status: 400, error: 'path parameter pin_id is missing' });
    expect(seen).toEqual([]);
    await bridge.request('getPin', { path: { pin_id: '..x' } });
    expect(seen).toEqual(['GET /mcp/pins/..x']);
  });
});
