import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mcpTools } from '../src/mcp/tools.js';
import { SANDBOX_MEMBER_IDS } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, newRequestId, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { startRoundRobinProxy, type RoundRobinProxy } from './support/http-proxy.js';
import { mcpOverHttp, toolText, type ToolResult } from './support/mcp.js';
import { REPLAY_SAMPLES, type ReplaySeen } from './support/mcp-calls.js';
import { MODERN_REVISION, modernOverHttp } from './support/mcp-v2.js';
import { runHerald, type HeraldProcess } from './support/process.js';
import { waitFor } from './support/wait.js';

/** What the scenario needs of a client, whichever SDK it comes from. */
interface AnyClient {
  callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<unknown>;
  close(): Promise<void>;
}

type Result = ToolResult & { structuredContent?: Record<string, unknown> };

/** The tools the modules declare, by name (their replay keys). */
const DECLARED = new Map(mcpTools().map((t) => [t.name, t]));

/** `herald mcp --http` as its own process; resolves with its URL once it listens. */
async function startMcpHttp(env: Record<string, string>): Promise<{ proc: HeraldProcess; port: number }> {
  const proc = runHerald(['mcp', '--http'], env);
  const url = await waitFor(() => {
    if (proc.child.exitCode !== null) throw new Error(`herald mcp --http exited:\n${proc.output()}`);
    return /Streamable HTTP at (http:\/\/\S+)/.exec(proc.output())?.[1];
  }, 'herald mcp --http listening', 60_000);
  return { proc, port: Number(new URL(url).port) };
}

/**
 * Two `herald mcp --http` replicas (one Herald; each its own folder and HERALD_MCP_STATE, as on two
 * hosts) behind a round-robin proxy: one agent's calls go to each in turn, and every one is
 * answered, on 2026-07-28 (stateless by design) and on 2025-11-25 (served stateless: no session for
 * one replica to hold). An edit on one replica of a post the other sent works: the records (which
 * messages it sent, their edit seqs) are Herald's (`/mcp/records/`, src/mcp/state.ts). And a stream cut mid-call loses only the answer:
 * every write tool with a replay key, its call sent again (new JSON-RPC id, same arguments, so the
 * same key) on the other replica, does nothing twice and says it replayed.
 */
describe('herald mcp --http: two replicas behind a round-robin proxy', { timeout: 240_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let proxy: RoundRobinProxy;
  const replicas: HeraldProcess[] = [];
  const token = newToken();
  /** The next call whose body holds this text has its answer withheld (once): its stream is cut after Herald did the work. */
  let cutNext: string | undefined;
  const hold = (body: string): boolean => {
    if (cutNext === undefined || !body.includes('"tools/call"') || !body.includes(cutNext)) return false;
    cutNext = undefined;
    return true;
  };

  beforeAll(async () => {
    // A trusted bot, command execution and the chat guild: every keyed write tool has something to do.
    h = await startTestHerald({ env: { HERALD_TRUSTED_BOT_IDS: SANDBOX_MEMBER_IDS.otherBot, HERALD_COMMAND_EXECUTION_ENABLED: 'true', HERALD_DISCORD_CHAT_GUILD: IDS.guild } });
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
    await h.mapDestination();
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    dir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-replicas-'));
    const env = { HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_TOKEN: token, HERALD_MCP_PORT: '0', HERALD_MCP_WAIT_MS: '15000', LOG_LEVEL: 'warn' };
    // Each replica its own folder (as on different hosts): nothing shared but Herald.
    const own = async (name: string): Promise<Record<string, string>> => {
      await mkdir(path.join(dir, name));
      return { ...env, HERALD_DATA_DIR: path.join(dir, name), HERALD_MCP_STATE: path.join(dir, name, 'mcp-state.json') };
    };
    const [a, b] = await Promise.all([startMcpHttp(await own('a')), startMcpHttp(await own('b'))]);
    replicas.push(a.proc, b.proc);
    proxy = await startRoundRobinProxy([a.port, b.port], { hold });
  }, 240_000);
  afterAll(async () => {
    await proxy?.close();
    for (const r of replicas) r.kill('SIGTERM');
    await Promise.all(replicas.map((r) => r.closed));
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const clients: [string, (url: string) => Promise<AnyClient>][] = [
    [MODERN_REVISION, (url) => modernOverHttp('replicas-v2', url, token)],
    ['2025-11-25', (url) => mcpOverHttp('replicas-v1', url, token)],
  ];

  for (const [revision, connect] of clients) {
    it(`serves one agent's calls on both replicas in turn, ${revision}`, async () => {
      const before = [...proxy.served];
      const client = await connect(`${proxy.url}/mcp`);
      try {
        const call = async (name: string, args: Record<string, unknown>): Promise<string> => {
          const r = (await client.callTool({ name, arguments: args })) as ToolResult;
          expect(r.isError, `${revision} ${name}: ${toolText(r)}`).toBeFalsy();
          return toolText(r);
        };
        const requestId = newRequestId();
        const content = `replicas ${revision}`;
        await call('get_capabilities', { guild_id: IDS.guild });
        expect(await call('post_message', { guild_id: IDS.guild, destination: 'alerts', content, request_id: requestId })).toContain('Posted: https://');
        expect(await call('get_delivery', { request_id: requestId })).toContain('Posted: https://');
        // Two edits: whichever replica took the post, one of them runs on the other (its seq from the shared records).
        expect(await call('edit_message', { request_id: requestId, content: `${content} (1)` })).toContain('Edited: https://');
        expect(await call('edit_message', { request_id: requestId, content: `${content} (2)` })).toContain('Edited: https://');
        await call('react', { message_ref: requestId, emoji: '👍' });
        await call('list_inbox', {});
        const sent = h.sandbox.allMessages().filter((m) => m.content.startsWith(content));
        expect(sent).toHaveLength(1);
        expect(sent[0]).toMatchObject({ content: `${content} (2)`, edits: 2 });
        expect(await call('delete_message', { message_ref: requestId })).toMatch(/Deleted/);
        // The records are Herald's: neither replica wrote a file of them.
        expect([...(await readdir(path.join(dir, 'a'))), ...(await readdir(path.join(dir, 'b')))]).toEqual([]);
      } finally {
        await client.close();
      }
      // Each replica took a fair share of this client's requests (round robin: within one of each other).
      const mine = proxy.served.map((n, i) => n - (before[i] ?? 0));
      expect(Math.min(...mine), JSON.stringify(mine)).toBeGreaterThanOrEqual(4);
      expect(Math.abs((mine[0] ?? 0) - (mine[1] ?? 0)), JSON.stringify(mine)).toBeLessThanOrEqual(1);
    });

    it(`every keyed write whose stream breaks mid-call, sent again with the same key, is done once and answers that it replayed, ${revision}`, async () => {
      const client = await connect(`${proxy.url}/mcp`);
      const call = async (name: string, args: Record<string, unknown>): Promise<Result> => (await client.callTool({ name, arguments: args })) as Result;
      try {
        // The keyed tools, as the server lists them: each tells the agent to re-issue a broken call with the same key.
        const { tools } = await (client as unknown as { listTools(): Promise<{ tools: { name: string; description?: string; outputSchema?: unknown }[] }> }).listTools();
        const keyed = tools.filter((t) => JSON.stringify(t.outputSchema).includes('"replayed"'));
        expect(keyed.map((t) => t.name).sort()).toEqual(Object.keys(REPLAY_SAMPLES).sort());
        for (const t of keyed) expect(t.description, t.name).toMatch(/call it again with the same arguments and the same \w+/);

        // What the samples act on, this revision's own: two posts, a pairing, a person's message asking for the command.
        const prefix = revision === MODERN_REVISION ? 'b1' : 'b2';
        const key = (n: number): string => `${prefix}${n.toString(16).padStart(2, '0')}`.repeat(16);
        const seen: ReplaySeen = { source: '', post: key(0xf1), toDelete: key(0xf2), scrapeChannel: revision === MODERN_REVISION ? IDS.channels.alerts : IDS.channels.ops, key };
        for (const id of [seen.post, seen.toDelete]) expect(toolText(await call('post_message', { guild_id: IDS.guild, destination: 'alerts', content: `cut target ${id.slice(0, 6)}`, request_id: id }))).toMatch(/^Posted: /);
        const pairReply = await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'pair' });
        expect((await call('pair', { code: /\*\*([A-Z2-9]{27})\*\*/.exec(pairReply.data?.content ?? '')?.[1] ?? '' })).isError).not.toBe(true);
        seen.source = h.sandbox.writeAsUser(SANDBOX_MEMBER_IDS.manager, IDS.channels.alerts, `please map digest to ops (${revision})`).id;

        for (const tool of keyed) {
          const sample = REPLAY_SAMPLES[tool.name];
          expect(sample, `${tool.name} has a replay key but no sample in test/support/mcp-calls.ts`).toBeDefined();
          if (sample === undefined) continue;
          const args = sample(seen);
          const replay = DECLARED.get(tool.name)?.replay;
          const marker = String(replay !== undefined && 'key' in replay ? args[replay.key] : '');
          expect(marker.length, tool.name).toBeGreaterThan(10);
          const answered = proxy.heldAnswered;
          cutNext = marker;
          const first = call(tool.name, args);
          // Herald did the work and answered; the answer never reaches the client: its connection is dropped.
          await waitFor(() => proxy.heldAnswered > answered, `${tool.name}: the withheld answer`);
          proxy.cutHeld();
          await expect(first, tool.name).rejects.toThrow();
          // The client sends the call again (a new JSON-RPC id: a new request), on the next replica.
          const second = await call(tool.name, args);
          expect(second.isError, `${tool.name}: ${toolText(second)}`).toBeFalsy();
          expect(second.structuredContent?.['replayed'], `${tool.name}: ${toolText(second)}`).toBe(true);
          expect(toolText(second), tool.name).toMatch(/replayed/i);
        }
        // The post whose stream was cut went out once.
        const post = REPLAY_SAMPLES['post_message']?.(seen)['content'];
        expect(h.sandbox.allMessages().filter((m) => m.content === post)).toHaveLength(1);
      } finally {
        await client.close();
      }
    });
  }
});
