import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { startHttp } from '../src/mcp/run.js';
import { SANDBOX_MEDIA_CHANNEL } from '../src/platforms/discord/sandbox/sandbox.js';
import { newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { MODERN_REVISION } from './support/mcp-v2.js';
import { localIssuer, type LocalIssuer } from './support/oauth.js';
import { waitFor } from './support/wait.js';

const TASKS = 'io.modelcontextprotocol/tasks';

/**
 * scrape_media as a task (the 2026-07-28 tasks extension), to a client that declares the extension
 * on its request: the call answers a task at once, `tasks/get` is polled to the scrape's result,
 * `tasks/cancel` stops a scrape; a client that does not declare it gets the tool's usual answer.
 * Raw requests: the v2 client (2.4.0) refuses a `resultType: "task"` from callTool.
 */
describe('herald mcp: scrape_media as a task', { timeout: 180_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let server: HttpServer;
  let url: string;
  let issuer: LocalIssuer;
  const token = newToken();
  let n = 0;

  const rpc = async (method: string, params: Record<string, unknown>, extensions?: Record<string, unknown>, bearer = token): Promise<{ result?: Record<string, unknown>; error?: { code: number; message: string } }> => {
    n += 1;
    const name = method === 'tools/call' ? String(params['name']) : String(params['taskId'] ?? '');
    const res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN_REVISION, 'mcp-method': method, ...(name === '' ? {} : { 'mcp-name': name }) },
      body: JSON.stringify({ jsonrpc: '2.0', id: n, method, params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN_REVISION, 'io.modelcontextprotocol/clientCapabilities': extensions === undefined ? {} : { extensions } } } }),
    });
    const body = await res.text();
    return JSON.parse(body.startsWith('{') ? body : (/^data: (.*)$/m.exec(body)?.[1] ?? '{}')) as { result?: Record<string, unknown>; error?: { code: number; message: string } };
  };
  const scrape = (ext?: Record<string, unknown>) => rpc('tools/call', { name: 'scrape_media', arguments: { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' } }, ext);

  beforeAll(async () => {
    h = await startTestHerald({ sandbox: { mediaMessages: 2_000 } });
    dir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-tasks-'));
    issuer = await localIssuer();
    const config = loadConfig({ HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_STATE: path.join(dir, 'state.json'), HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: token, HERALD_MCP_OAUTH_ISSUER: issuer.url });
    ({ url, server } = await startHttp(config, h.bridgeToken, token, createLogger('silent')));
  }, 180_000);
  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
    await issuer?.close();
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('server/discover declares the extension', async () => {
    const { result } = await rpc('server/discover', {});
    expect((result?.['capabilities'] as { extensions?: Record<string, unknown> }).extensions).toHaveProperty([TASKS]);
  });

  it('start answers a task at once; tasks/get is polled to the completed scrape', async () => {
    const { result } = await scrape({ [TASKS]: {} });
    expect(result).toMatchObject({ resultType: 'task', status: 'working', ttlMs: null, pollIntervalMs: 5000 });
    const taskId = String(result?.['taskId']);
    expect(taskId).toMatch(/^scrape:[0-9a-f-]{36}$/);
    const done = await waitFor(async () => {
      const r = await rpc('tasks/get', { taskId });
      expect(r.error).toBeUndefined();
      return r.result?.['status'] === 'working' ? undefined : r.result;
    }, 'the task to end', 120_000);
    expect(done).toMatchObject({ resultType: 'complete', taskId, status: 'completed' });
    const job = (done['result'] as { structuredContent: { id: string; state: string; itemsFound: number } }).structuredContent;
    expect(job).toMatchObject({ id: taskId.slice('scrape:'.length), state: 'completed' });
    expect(job.itemsFound).toBeGreaterThan(0);
  });

  it('tasks/cancel stops a running scrape: the task ends cancelled', async () => {
    const { result } = await scrape({ [TASKS]: {} });
    expect(result?.['resultType']).toBe('task');
    const taskId = String(result?.['taskId']);
    const cancelled = await rpc('tasks/cancel', { taskId });
    expect(cancelled.error).toBeUndefined();
    const after = await rpc('tasks/get', { taskId });
    expect(after.result).toMatchObject({ taskId, status: 'cancelled' });
  });

  it("tasks/get and tasks/cancel hold the caller to the policy of get_media_scrape and stop_media_scrape", async () => {
    const reader = await issuer.sign({ client_id: 'reader', sub: 'bob', scope: 'read', aud: url });
    const started = await scrape({ [TASKS]: {} });
    expect(started.result?.['resultType']).toBe('task');
    const taskId = String(started.result?.['taskId']);
    // A read-only token cannot start one (the tool's own refusal, no task) ...
    const start = await rpc('tools/call', { name: 'scrape_media', arguments: { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' } }, { [TASKS]: {} }, reader);
    expect(start.result?.['resultType']).toBe('complete');
    expect(start.result?.['isError']).toBe(true);
    // ... may read another's task (get_media_scrape is read-only), and may not stop it (a write).
    expect((await rpc('tasks/get', { taskId }, undefined, reader)).result).toMatchObject({ taskId });
    const cancel = await rpc('tasks/cancel', { taskId }, undefined, reader);
    expect(cancel.error?.code).toBe(-32602);
    expect(cancel.error?.message).toMatch(/taskId: scrape:.*scope/i);
    expect((await rpc('tasks/cancel', { taskId })).error).toBeUndefined();
  });

  it('an unknown task is refused, naming taskId', async () => {
    for (const taskId of ['nothing', 'scrape:00000000-0000-4000-8000-000000000000']) {
      const r = await rpc('tasks/get', { taskId });
      expect(r.error?.code).toBe(-32602);
      expect(r.error?.message).toContain('taskId');
    }
  });

  it('without the extension declared, scrape_media answers as a tool (the scrape itself)', async () => {
    const { result } = await scrape();
    expect(result?.['resultType']).toBe('complete');
    const job = result?.['structuredContent'] as { id: string; state: string };
    expect(['running', 'completed']).toContain(job.state);
    await rpc('tools/call', { name: 'stop_media_scrape', arguments: { scrapeId: job.id } });
  });
});
