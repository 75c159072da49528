import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startHttp } from '../src/mcp/run.js';
import { createLogger } from '../src/infra/log.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { mcpOverHttp, toolText, type ToolResult } from './support/mcp.js';
import { localIssuer, type LocalIssuer } from './support/oauth.js';

/**
 * A file path is the local user's word (docs/architecture.md, "local authority"): `herald mcp --http`
 * serves remote callers, so it reads no `{path}` unless its operator names a folder
 * (HERALD_MCP_FILES_DIR), and then only inside it. Whatever the reason a path is refused, the answer
 * is the same, so a caller cannot learn what exists on the server. (stdio, the person who started the
 * process, still attaches any path: test/files-mcp.test.ts.)
 */
describe('herald mcp --http: files by path are the local user\'s word', { timeout: 120_000 }, () => {
  let h: TestHerald;
  let dir: string;
  let folder: string;
  let issuer: LocalIssuer;
  const servers: HttpServer[] = [];
  const clients: Client[] = [];
  let plainUrl: string;
  let folderUrl: string;
  const staticToken = newToken();

  const start = async (extra: Record<string, string>): Promise<string> => {
    const config = loadConfig({
      HERALD_URL: h.url,
      MCP_BRIDGE_TOKEN: h.bridgeToken,
      HERALD_MCP_STATE: path.join(dir, `state-${servers.length}.json`),
      HERALD_MCP_PORT: '0',
      HERALD_MCP_TOKEN: staticToken,
      HERALD_MCP_WAIT_MS: '15000',
      HERALD_MCP_OAUTH_ISSUER: issuer.url,
      ...extra,
    });
    const { url, server } = await startHttp(config, h.bridgeToken, staticToken, createLogger('silent'));
    servers.push(server);
    return url;
  };
  /** An OAuth client with the write scope, as a remote agent connects. */
  const agent = async (url: string): Promise<Client> => {
    const c = await mcpOverHttp('remote-agent', url, await issuer.sign({ client_id: 'remote-agent', scope: 'write', aud: url }));
    clients.push(c);
    return c;
  };
  const postWith = async (c: Client, file: Record<string, string>): Promise<{ text: string; isError: boolean; content: string }> => {
    const content = `by path ${randomBytes(6).toString('hex')}`;
    const r = (await c.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content, files: [file] } })) as ToolResult;
    return { text: toolText(r), isError: r.isError === true, content };
  };
  const posted = (content: string) => h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.content === content);
  const filesItem = async (c: Client, tool: string): Promise<Record<string, unknown>> => {
    const listed = (await c.listTools()).tools.find((t) => t.name === tool);
    const files = (listed?.inputSchema.properties as Record<string, { items: { properties: Record<string, unknown> } }> | undefined)?.['files'];
    return files?.items.properties ?? {};
  };

  beforeAll(async () => {
    h = await startTestHerald();
    await h.mapDestination();
    issuer = await localIssuer();
    dir = await mkdtemp(path.join(tmpdir(), 'herald-mcp-paths-'));
    folder = path.join(dir, 'shared');
    await mkdir(path.join(folder, 'sub'), { recursive: true });
    await writeFile(path.join(folder, 'report.txt'), 'inside the folder');
    await writeFile(path.join(dir, 'secret.txt'), 'outside the folder');
    // A data folder's token file, as sandbox mode keeps one.
    await mkdir(path.join(dir, 'data'));
    await writeFile(path.join(dir, 'data', 'sandbox-tokens.json'), JSON.stringify({ bridge: newToken(), admin: newToken() }));
    await symlink(path.join(dir, 'secret.txt'), path.join(folder, 'escape.txt'));
    await symlink(dir, path.join(folder, 'up'));
    plainUrl = await start({});
    folderUrl = await start({ HERALD_MCP_FILES_DIR: folder });
  }, 120_000);
  afterAll(async () => {
    for (const c of clients) await c.close();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
    await issuer?.close();
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('without a folder: no path is read, whatever it names, and the tools do not offer one', async () => {
    const c = await agent(plainUrl);
    const answers: string[] = [];
    for (const where of ['/proc/self/environ', path.join(dir, 'data', 'sandbox-tokens.json'), path.join(dir, 'no-such-file'), path.join(folder, 'report.txt')]) {
      const r = await postWith(c, { path: where });
      expect(r.isError, `${where}: ${r.text}`).toBe(true);
      expect(r.text).not.toContain(where);
      expect(posted(r.content)).toHaveLength(0);
      answers.push(r.text);
    }
    // One answer for an existing file, a missing one, a secret one: nothing about the disk leaks.
    expect(new Set(answers).size).toBe(1);
    expect(answers[0]).toContain('files[0].path is not accepted by this server');
    expect(answers[0]).toContain('{base64, filename}');
    for (const tool of ['post_message', 'send_dm']) {
      const item = await filesItem(c, tool);
      expect(Object.keys(item), tool).toEqual(expect.arrayContaining(['base64', 'filename']));
      expect(Object.keys(item), tool).not.toContain('path');
    }
    // base64 still attaches.
    const inline = await postWith(c, { base64: Buffer.from('inline bytes').toString('base64'), filename: 'inline.txt' });
    expect(inline.isError, inline.text).toBe(false);
    expect(posted(inline.content)[0]?.attachments?.map((a) => a.filename)).toEqual(['inline.txt']);
  });

  it('with HERALD_MCP_FILES_DIR: a file inside attaches; escapes, missing files and non-files get one answer', async () => {
    const c = await agent(folderUrl);
    expect(Object.keys(await filesItem(c, 'post_message'))).toContain('path');
    for (const where of ['report.txt', path.join(folder, 'report.txt'), 'sub/../report.txt']) {
      const ok = await postWith(c, { path: where });
      expect(ok.isError, `${where}: ${ok.text}`).toBe(false);
      expect(posted(ok.content)[0]?.attachments?.map((a) => [a.filename, a.size])).toEqual([['report.txt', 'inside the folder'.length]]);
    }
    const refused: string[] = [];
    const outside = ['../secret.txt', path.join(dir, 'secret.txt'), '/proc/self/environ', '../data/sandbox-tokens.json', 'escape.txt', 'up/secret.txt', 'up/data/sandbox-tokens.json', 'missing.txt', '../missing.txt', 'sub', '.'];
    for (const where of outside) {
      const r = await postWith(c, { path: where });
      expect(r.isError, `${where}: ${r.text}`).toBe(true);
      expect(posted(r.content)).toHaveLength(0);
      expect(r.text).not.toContain('outside the folder');
      refused.push(r.text);
    }
    expect(new Set(refused).size).toBe(1);
    expect(refused[0]).toBe('Nothing was sent: files[0].path is not a file this server may attach (only files inside the folder its operator named).');
  });
});
