import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startHttp } from '../src/mcp/run.js';
import { listedTools } from '../src/mcp/server.js';
import { mcpTools } from '../src/mcp/tools.js';
import { createLogger } from '../src/infra/log.js';
import { SANDBOX_MEMBER_IDS } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { mcpOverHttp, toolText, type ToolResult } from './support/mcp.js';
import { REPLAY_SAMPLES, type ReplaySeen } from './support/mcp-calls.js';

/** The posts the samples act on (made by post_message over MCP, so they are this agent's own). */
const POST = 'a1'.repeat(32);
const TO_DELETE = 'a2'.repeat(32);
const key = (n: number): string => n.toString(16).padStart(2, '0').repeat(32);

type Result = ToolResult & { structuredContent?: Record<string, unknown> };

describe('every MCP write tool: a retried call is told from a new one', () => {
  const writes = mcpTools().filter((t) => !t.annotations.readOnlyHint);

  it('each declares its replay key (an optional argument, and `replayed` in its output schema) or why the same call again changes nothing', () => {
    expect(writes.length).toBeGreaterThan(10);
    const listed = new Map(listedTools().map((t) => [t.name, t]));
    for (const tool of writes) {
      expect(tool.replay, `${tool.name} declares no replay: give it a key argument, or say why it needs none`).toBeDefined();
      if (tool.replay === undefined) continue;
      if ('key' in tool.replay) {
        const properties = tool.inputSchema['properties'] as Record<string, unknown>;
        expect(properties[tool.replay.key], `${tool.name}: its key ${tool.replay.key} is an argument`).toBeDefined();
        expect((tool.inputSchema['required'] as string[] | undefined) ?? [], `${tool.name}: its key is optional`).not.toContain(tool.replay.key);
        expect(JSON.stringify(listed.get(tool.name)?.outputSchema), `${tool.name}: replayed in its output schema`).toContain('"replayed"');
        expect(REPLAY_SAMPLES[tool.name], `${tool.name} has a replay key but no sample call in test/support/mcp-calls.ts`).toBeDefined();
      } else {
        expect(tool.replay.natural.length, tool.name).toBeGreaterThan(20);
      }
    }
    expect(Object.keys(REPLAY_SAMPLES).sort()).toEqual(writes.filter((t) => t.replay !== undefined && 'key' in t.replay).map((t) => t.name).sort());
  });

  describe('over MCP, against Herald', { timeout: 180_000 }, () => {
    let h: TestHerald;
    let dir: string;
    let server: HttpServer;
    let client: Client;
    const token = newToken();
    const call = async (name: string, args: Record<string, unknown>): Promise<Result> => (await client.callTool({ name, arguments: args })) as Result;

    beforeAll(async () => {
      h = await startTestHerald({ env: { HERALD_TRUSTED_BOT_IDS: SANDBOX_MEMBER_IDS.otherBot, HERALD_COMMAND_EXECUTION_ENABLED: 'true', HERALD_DISCORD_CHAT_GUILD: IDS.guild } });
      await h.mapDestination();
      dir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-replay-'));
      const config = loadConfig({ HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_STATE: path.join(dir, 'state.json'), HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: token, HERALD_MCP_WAIT_MS: '15000' });
      ({ server } = await startHttp(config, h.bridgeToken, token, createLogger('silent')).then((r) => ({ server: r.server, url: r.url })).then(async (r) => {
        client = await mcpOverHttp('replay-walk', r.url, token);
        return r;
      }));
    }, 180_000);
    afterAll(async () => {
      await client?.close();
      server?.closeAllConnections();
      await new Promise<void>((resolve) => server?.close(() => resolve()));
      await h?.close();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    it('calls each keyed tool twice with the same key: the first sent, the second says it replayed and sends nothing new', async () => {
      // What the samples act on: two posts of this agent's own, a pairing, a person's message asking for the command.
      for (const id of [POST, TO_DELETE]) expect(toolText(await call('post_message', { guild_id: IDS.guild, destination: 'alerts', content: `replay: target ${id.slice(0, 4)}`, request_id: id }))).toMatch(/^Posted: /);
      await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
      const pairReply = await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'pair' });
      expect((await call('pair', { code: /\*\*([A-Z2-9]{27})\*\*/.exec(pairReply.data?.content ?? '')?.[1] ?? '' })).isError).not.toBe(true);
      const seen: ReplaySeen = { source: h.sandbox.writeAsUser(SANDBOX_MEMBER_IDS.manager, IDS.channels.alerts, 'please map digest to ops').id, post: POST, toDelete: TO_DELETE, scrapeChannel: IDS.channels.alerts, key };

      for (const tool of mcpTools()) {
        const sample = REPLAY_SAMPLES[tool.name];
        if (sample === undefined) continue;
        const args = sample(seen);
        const first = await call(tool.name, args);
        expect(first.isError, `${tool.name}: ${toolText(first)}`).not.toBe(true);
        expect(first.structuredContent?.['replayed'], `${tool.name} (first call): ${toolText(first)}`).toBe(false);
        expect(toolText(first), tool.name).not.toMatch(/^Replayed/);
        const second = await call(tool.name, args);
        expect(second.structuredContent?.['replayed'], `${tool.name} (second call): ${toolText(second)}`).toBe(true);
        expect(toolText(second), tool.name).toMatch(/replayed/i);
      }
      // The repeated post went out once.
      const post = REPLAY_SAMPLES['post_message']?.(seen)['content'];
      expect(h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.content === post)).toHaveLength(1);
      // The repeated scrape started one scrape of #alerts, and the same key for another channel is refused.
      const scrapes = (await call('list_media_scrapes', {})).structuredContent?.['scrapes'] as { channelId: string }[];
      expect(scrapes.filter((s) => s.channelId === IDS.channels.alerts)).toHaveLength(1);
      const reused = await call('scrape_media', { channelId: IDS.channels.ops, mode: 'links', request_id: key(9) });
      expect(reused.isError).toBe(true);
      expect(toolText(reused)).toMatch(/request_id was already used/);
    });
  });
});
