import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { startHttp } from '../src/mcp/run.js';
import { newRequestId, newToken, startTestHerald, type TestHerald } from './support/herald.js';

/**
 * An upgrade loses no edit seq: the records file an older `herald mcp` wrote (HERALD_MCP_STATE, the
 * connector's at the top, each OAuth client's under `clients`) is imported into Herald's store when
 * `herald mcp` starts, each sender's as its own, then renamed `<file>.imported` (read once).
 */
describe('herald mcp imports an older records file into Herald once', { timeout: 120_000 }, () => {
  let h: TestHerald;
  let dir: string;
  beforeAll(async () => {
    h = await startTestHerald();
    dir = await mkdtemp(path.join(tmpdir(), 'herald-records-import-'));
  });
  afterAll(async () => {
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const record = async (id: string, client?: string): Promise<{ status: number; json: unknown }> => {
    const res = await fetch(`${h.url}/mcp/records/messages/${id}`, { headers: { authorization: `Bearer ${h.bridgeToken}`, ...(client === undefined ? {} : { 'x-herald-policy-client': client }) } });
    return { status: res.status, json: await res.json() };
  };
  const start = async (file: string): Promise<void> => {
    const token = newToken();
    const config = loadConfig({ HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_STATE: file, HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: token });
    const { server } = await startHttp(config, h.bridgeToken, token, createLogger('silent'));
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };

  it("takes the connector's and each client's records in, keeps their seqs, and renames the file", async () => {
    const mine = newRequestId();
    const theirs = newRequestId();
    const editId = newRequestId();
    const at = new Date().toISOString();
    const file = path.join(dir, 'mcp-state.json');
    await writeFile(
      file,
      JSON.stringify({
        pairing: { user_id: '999999999999999999', generation: 'x'.repeat(22), paired_at: at },
        messages: { [mine]: { kind: 'post', seq: 3, sent_at: at, edits: { [editId]: 2 } } },
        clients: { alice: { messages: { [theirs]: { kind: 'dm', seq: 1, sent_at: at } }, sent: { [theirs]: at } } },
      }),
    );
    await start(file);
    expect(await record(mine)).toEqual({ status: 200, json: { request_id: mine, kind: 'post', seq: 3, sent_at: at } });
    expect(await record(theirs, 'alice')).toEqual({ status: 200, json: { request_id: theirs, kind: 'dm', seq: 1, sent_at: at } });
    expect((await record(theirs)).status).toBe(404);
    expect(await readdir(dir)).toEqual(['mcp-state.json.imported']);

    // Its next seq follows the imported one; the same edit id keeps its seq.
    const seq = async (body: unknown): Promise<unknown> =>
      (await fetch(`${h.url}/mcp/records/messages/${mine}/seq`, { method: 'POST', headers: { authorization: `Bearer ${h.bridgeToken}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();
    expect(await seq({ edit_id: editId })).toEqual({ seq: 2 });
    expect(await seq({})).toEqual({ seq: 4 });
    // Started again: nothing left to import, nothing changed.
    await start(file);
    expect(await record(mine)).toMatchObject({ json: { seq: 4 } });
    expect(await readdir(dir)).toEqual(['mcp-state.json.imported']);
  });
});
