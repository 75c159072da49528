import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileTools } from '../src/modules/files/files.tools.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { mcpOverStdio, toolText, type ToolResult } from './support/mcp.js';

// herald mcp: post_message takes files ({path} on the agent's machine, or {base64, filename});
// download_attachment fetches one into Herald's store and answers its metadata, never its bytes.
describe('herald mcp: files out and in', () => {
  let h: TestHerald;
  let dir: string;
  let mcp: Client;

  beforeAll(async () => {
    h = await startTestHerald({ sandbox: { mediaMessages: 0 } });
    await h.mapDestination();
    dir = await mkdtemp(path.join(tmpdir(), 'herald-files-mcp-'));
    mcp = await mcpOverStdio('herald-files-test', { HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_STATE: path.join(dir, 'state.json'), HERALD_MCP_WAIT_MS: '15000' });
  });
  afterAll(async () => {
    await mcp?.close();
    await h?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('posts files from a path and from base64, once, and downloads one back by its ids', async () => {
    const onDisk = randomBytes(1500);
    const where = path.join(dir, 'notes.pdf');
    await writeFile(where, onDisk);
    const inline = randomBytes(300);
    const content = `files via mcp ${Date.now()}`;
    const r = (await mcp.callTool({
      name: 'post_message',
      arguments: { guild_id: IDS.guild, destination: 'alerts', content, files: [{ path: where, description: 'the notes' }, { base64: inline.toString('base64'), filename: 'raw.png' }] },
    })) as ToolResult;
    expect(r.isError, toolText(r)).not.toBe(true);
    expect(toolText(r)).toContain('Posted: https://discord.com/channels/');
    const sent = h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.content === content);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.attachments?.map((a) => [a.filename, a.size, a.content_type, a.description])).toEqual([
      ['notes.pdf', 1500, 'application/pdf', 'the notes'],
      ['raw.png', 300, 'image/png', undefined],
    ]);
    const attachment = sent[0]?.attachments?.[0];
    const got = (await mcp.callTool({ name: 'download_attachment', arguments: { channel_id: IDS.channels.alerts, message_id: sent[0]?.id, attachment_id: attachment?.id } })) as ToolResult & { structuredContent?: Record<string, unknown> };
    expect(got.isError, toolText(got)).not.toBe(true);
    expect(got.structuredContent).toMatchObject({ filename: 'notes.pdf', size: 1500, content_type: 'application/pdf', existing: false });
    expect(toolText(got)).not.toContain(onDisk.toString('base64').slice(0, 40));
    // The entry carries its title, truthful hints and the contract schema of its structured result.
    expect(fileTools().find((t) => t.name === 'download_attachment')).toMatchObject({ title: 'Download an attachment', output: 'StoredFile', annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true } });
  });

  it('says what is wrong with a file it cannot read, and sends nothing', async () => {
    const content = `unreadable ${Date.now()}`;
    const r = (await mcp.callTool({ name: 'post_message', arguments: { guild_id: IDS.guild, destination: 'alerts', content, files: [{ path: path.join(dir, 'missing.png') }] } })) as ToolResult;
    expect(r.isError).toBe(true);
    // One answer whatever the reason (missing, unreadable, not a file): no error code, no path echoed.
    expect(toolText(r)).toBe('Nothing was sent: files[0].path is not a file this server may attach.');
    expect(h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.content === content)).toHaveLength(0);
  });
});
