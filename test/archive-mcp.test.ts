import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBridgeClient } from '../src/client/bridge-client.js';
import { createMcpServer } from '../src/mcp/server.js';
import { storeRecords } from '../src/mcp/state.js';
import { createLogger } from '../src/infra/log.js';
import { SANDBOX_MEDIA_CHANNEL } from '../src/platforms/discord/sandbox/sandbox.js';
import { startTestHerald, type TestHerald } from './support/herald.js';
import { callTool, mcpClient } from './support/mcp.js';
import { waitFor } from './support/wait.js';

/**
 * The archive's MCP tools against a running Herald: an operator starts a scrape (as the web UI
 * does) and an agent sees the same items over MCP; the trust tiers hold for the agent too.
 */
describe('media archive over MCP', { timeout: 180_000 }, () => {
  let h: TestHerald;
  let stateDir: string;
  const clients: Client[] = [];

  /** An MCP client of Herald's MCP server, with the bridge token and, optionally, the admin token. */
  async function agent(withAdmin: boolean): Promise<Client> {
    const headers = { 'x-herald-client': 'mcp' };
    const server = createMcpServer({
      bridge: createBridgeClient({ baseUrl: h.url, token: h.bridgeToken, headers }),
      admin: withAdmin ? createBridgeClient({ baseUrl: h.url, token: h.adminToken, headers }) : undefined,
      state: storeRecords(createBridgeClient({ baseUrl: h.url, token: h.bridgeToken, headers }), 'connector'),
      waitMs: 1_000,
      log: createLogger('silent'),
    });
    const [a, b] = InMemoryTransport.createLinkedPair();
    await server.connect(a);
    const client = await mcpClient('archive-test', b);
    clients.push(client);
    return client;
  }

  beforeAll(async () => {
    h = await startTestHerald({ sandbox: { mediaMessages: 2_000 }, env: { HERALD_MEDIA_MAX_FILE_BYTES: '1048576' } });
    stateDir = await mkdtemp(path.join(tmpdir(), 'herald-archive-mcp-'));
  }, 180_000);
  afterAll(async () => {
    for (const c of clients) await c.close();
    await h.close();
    await rm(stateDir, { recursive: true, force: true });
  });

  it('an operator starts a scrape; the agent queries it and sees the same items', async () => {
    const started = await h.admin.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' }, { headers: { 'x-herald-client': 'ui' } });
    const id = (started.json as { id: string }).id;
    const bot = await agent(false);
    const done = await waitFor(async () => {
      const r = await callTool(bot, 'get_media_scrape', { scrapeId: id });
      return (r.json as { state: string }).state === 'completed' ? (r.json as { itemsFound: number }) : undefined;
    }, 'the scrape to complete');
    expect(done.itemsFound).toBeGreaterThan(1_000);
    const viaHttp = (await h.admin.get(`/admin/archive/media?scrapeId=${id}&kind=image&limit=100`)).json;
    const viaMcp = await callTool(bot, 'query_media', { scrapeId: id, kind: 'image', limit: 100 });
    expect(viaMcp.isError).toBe(false);
    expect(viaMcp.json).toEqual(viaHttp);
    const next = await callTool(bot, 'query_media', { scrapeId: id, kind: 'image', limit: 100, cursor: (viaHttp as { nextCursor: string }).nextCursor });
    expect(next.json).toEqual((await h.admin.get(`/admin/archive/media?scrapeId=${id}&kind=image&limit=100&cursor=${(viaHttp as { nextCursor: string }).nextCursor}`)).json);
    const first = (viaHttp as { items: { id: string }[] }).items[0];
    expect((await callTool(bot, 'get_media_item', { itemId: first?.id })).json).toEqual((await h.admin.get(`/admin/archive/media/${first?.id ?? ''}`)).json);
    expect((await callTool(bot, 'list_media_scrapes')).json).toEqual((await h.admin.get('/admin/archive/scrapes')).json);
    expect((await callTool(bot, 'get_media_storage')).json).toMatchObject({ usedBytes: 0, level: 'ok' });
    expect((await callTool(bot, 'get_media_item', { itemId: '999999' })).text).toContain('media item not found');
    expect((await callTool(bot, 'query_media', { after: 'not a time' })).isError).toBe(true);
  });

  it('download and delete need the admin tier, for the agent as for anyone; then they work and are logged', async () => {
    const trusted = await agent(false);
    const refused = await callTool(trusted, 'scrape_media', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'download' });
    expect(refused.isError).toBe(true);
    expect(refused.text).toContain('admin tier');
    const scrapes = (await callTool(trusted, 'list_media_scrapes')).json as { scrapes: { id: string }[] };
    const links = scrapes.scrapes[0]?.id ?? '';
    expect((await callTool(trusted, 'delete_media_scrape', { scrapeId: links })).text).toContain('admin tier');

    const admin = await agent(true);
    const download = await callTool(admin, 'scrape_media', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'download' });
    expect(download.isError).toBe(false);
    const id = (download.json as { id: string; mode: string }).id;
    expect((download.json as { mode: string }).mode).toBe('download');
    expect((await callTool(trusted, 'scrape_media', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' })).text).toContain('already running');
    const stopped = await callTool(trusted, 'stop_media_scrape', { scrapeId: id });
    expect((stopped.json as { state: string }).state).toBe('stopped');
    // Stored items carry a local path and never their bytes.
    const stored = await waitFor(async () => {
      const r = (await callTool(trusted, 'query_media', { scrapeId: id, limit: 5 })).json as { items: { state: string; localPath: string | null }[] };
      return r.items.some((i) => i.state === 'stored') ? r.items : undefined;
    }, 'stored items');
    expect(stored.find((i) => i.state === 'stored')?.localPath).toMatch(/\/media\/[0-9a-f]{2}\/[0-9a-f]{2}\/[0-9a-f]{64}$/);
    expect((await callTool(admin, 'delete_media_scrape', { scrapeId: id })).text).toContain('Deleted scrape');

    const log = (await h.admin.get('/admin/archive/actions?limit=200')).json as { actions: { actor: string; via: string; action: string; result: string }[] };
    expect(log.actions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ actor: 'bridge', via: 'mcp', action: 'start_scrape:download', result: 'refused' }),
        expect.objectContaining({ actor: 'admin', via: 'mcp', action: 'start_scrape:download', result: 'ok' }),
        expect.objectContaining({ actor: 'bridge', via: 'mcp', action: 'stop_scrape', result: 'ok' }),
        expect.objectContaining({ actor: 'admin', via: 'mcp', action: 'delete_scrape', result: 'ok' }),
        expect.objectContaining({ actor: 'admin', via: 'ui', action: 'start_scrape:links', result: 'ok' }),
      ]),
    );
  });

  it('near the storage limit the agent gets the warning and starts only when it confirms', async () => {
    const bot = await agent(false);
    await h.herald.store.db.insertInto('media_blobs').values({ sha256: 'e'.repeat(64), size_bytes: 9 * 1024 ** 3, content_type: 'image/png', path: 'ee/ee/none', created_at: new Date() }).execute();
    const warned = await callTool(bot, 'scrape_media', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' });
    expect(warned.isError).toBe(true);
    expect(warned.text).toContain('confirm: true');
    const confirmed = await callTool(bot, 'scrape_media', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links', confirm: true });
    expect(confirmed.isError).toBe(false);
    await callTool(bot, 'stop_media_scrape', { scrapeId: (confirmed.json as { id: string }).id });
    await h.herald.store.db.deleteFrom('media_blobs').where('sha256', '=', 'e'.repeat(64)).execute();
  });
});
