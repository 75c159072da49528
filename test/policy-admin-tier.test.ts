import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBridgeClient } from '../src/client/bridge-client.js';
import { parsePolicy } from '../src/infra/policy/policy.js';
import { McpPolicy } from '../src/mcp/policy.js';
import { createMcpServer } from '../src/mcp/server.js';
import { storeRecords } from '../src/mcp/state.js';
import { mcpTools } from '../src/mcp/tools.js';
import { createLogger } from '../src/infra/log.js';
import { PLATFORM_NAMES } from '../src/platforms/platforms.js';
import { SANDBOX_MEDIA_CHANNEL } from '../src/platforms/discord/sandbox/sandbox.js';
import { startTestHerald, type TestHerald } from './support/herald.js';
import { callTool, mcpClient } from './support/mcp.js';

// herald mcp given HERALD_ADMIN_TOKEN calls the archive's admin tier (scrape_media in download
// mode, delete_media_scrape) with it, for whatever agent is connected. The operator's targeting
// rules and write caps are held by Herald on the bridge token's calls alone (herald mcp checks
// only tools, read-only, scope and confirm): an agent kept to #agents must not scrape another
// channel by asking for download mode. A caller with targets or caps calls with the bridge token.

const POLICY = `
connector:
  channels: ['#agents']
`;

describe("the operator's policy and herald mcp's admin tier", { timeout: 180_000 }, () => {
  let h: TestHerald;
  let dir: string;
  const clients: Client[] = [];

  async function agent(): Promise<Client> {
    const headers = { 'x-herald-client': 'mcp' };
    const policy = new McpPolicy(parsePolicy(POLICY, 'policy.yaml', { tools: mcpTools().map((t) => t.name), platforms: PLATFORM_NAMES }));
    const server = createMcpServer(
      {
        bridge: createBridgeClient({ baseUrl: h.url, token: h.bridgeToken, headers }),
        admin: createBridgeClient({ baseUrl: h.url, token: h.adminToken, headers }),
        state: storeRecords(createBridgeClient({ baseUrl: h.url, token: h.bridgeToken, headers }), 'connector'),
        waitMs: 1_000,
        log: createLogger('silent'),
      },
      { policy, caller: {} },
    );
    const [a, b] = InMemoryTransport.createLinkedPair();
    await server.connect(a);
    const client = await mcpClient('policy-admin-tier', b);
    clients.push(client);
    return client;
  }

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-admin-tier-'));
    await writeFile(path.join(dir, 'policy.yaml'), POLICY);
    h = await startTestHerald({ sandbox: { mediaMessages: 20 }, env: { HERALD_POLICY: path.join(dir, 'policy.yaml') } });
  }, 180_000);
  afterAll(async () => {
    for (const c of clients) await c.close();
    await h?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('scrape_media of a channel outside the rules, links mode (the bridge token): refused by policy: channels', async () => {
    const r = await callTool(await agent(), 'scrape_media', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' });
    expect(r.isError).toBe(true);
    expect(r.text).toContain('refused by policy: channels');
  });

  // The call went with the admin token, which Herald's policy does not hold, and the scrape started.
  it('scrape_media of the same channel in download mode (the admin token): refused by policy: channels too', async () => {
    const r = await callTool(await agent(), 'scrape_media', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'download' });
    expect(r.isError).toBe(true);
    expect(r.text).toContain('refused by policy: channels');
  });
});
