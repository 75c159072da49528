import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IDS, newRequestId, startTestHerald, type TestHerald } from './support/herald.js';

// openapi/files.yaml: files out (POST /mcp/files, body.attachments) and in (POST /mcp/attachments/download).

/** A small PNG's bytes (the signature and some noise: Herald and the sandbox only carry them). */
function picture(size = 600): Buffer {
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), randomBytes(size - 8)]);
}
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

async function multipart(parts: { name: string; data: Buffer; filename: string; type: string }[]): Promise<{ body: Buffer; type: string }> {
  const form = new FormData();
  for (const p of parts) form.append(p.name, new Blob([p.data], { type: p.type }), p.filename);
  const res = new Response(form);
  return { body: Buffer.from(await res.arrayBuffer()), type: res.headers.get('content-type') ?? '' };
}

function postWith(requestId: string, attachments: unknown, content = 'with a picture'): Record<string, unknown> {
  return { request_id: requestId, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts' }, body: { content, attachments } };
}

describe('files out and in', () => {
  let h: TestHerald;
  const upload = (data: Buffer, filename: string, type = 'image/png') => h.bridge.call('POST', `/mcp/files?filename=${encodeURIComponent(filename)}`, { raw: data, headers: { 'content-type': type } });

  beforeAll(async () => {
    // A small store cap and Discord file limit, so the limits are reached with small files.
    h = await startTestHerald({ env: { HERALD_FILE_MAX_BYTES: '5000', HERALD_DISCORD_MAX_FILE_BYTES: '3000' } });
    await h.mapDestination('alerts', IDS.channels.alerts);
  });
  afterAll(() => h.close());

  it('stores a raw upload by its SHA-256 and answers the same id for the same bytes', async () => {
    const data = picture();
    const first = await upload(data, 'cat.png');
    expect(first.status).toBe(201);
    expect(first.json).toEqual({ file: sha(data), sha256: sha(data), size: data.length, content_type: 'image/png', filename: 'cat.png', url: `/mcp/files/${sha(data)}`, existing: false });
    const again = await upload(data, 'same.png');
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ file: sha(data), existing: true, filename: 'same.png' });
    // The bytes come back with the bridge token, as stored.
    const res = await fetch(`${h.url}/mcp/files/${sha(data)}`, { headers: { authorization: `Bearer ${h.bridgeToken}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await res.arrayBuffer()).equals(data)).toBe(true);
    expect((await fetch(`${h.url}/mcp/files/${sha(data)}`)).status).toBe(401);
  });

  it('stores the one file part of a multipart upload', async () => {
    const data = picture(700);
    const { body, type } = await multipart([{ name: 'file', data, filename: 'dog.png', type: 'image/png' }]);
    const res = await h.bridge.call('POST', '/mcp/files', { raw: body, headers: { 'content-type': type } });
    expect(res.status).toBe(201);
    expect(res.json).toMatchObject({ file: sha(data), size: 700, content_type: 'image/png', filename: 'dog.png' });
    const two = await multipart([
      { name: 'file', data, filename: 'a.png', type: 'image/png' },
      { name: 'other', data, filename: 'b.png', type: 'image/png' },
    ]);
    const refused = await h.bridge.call('POST', '/mcp/files', { raw: two.body, headers: { 'content-type': two.type } });
    expect(refused.status).toBe(400);
    expect(refused.json).toEqual({ error: 'multipart body must hold exactly one file part' });
  });

  it('refuses a file over HERALD_FILE_MAX_BYTES (413), a missing or bad filename and an empty body (400)', async () => {
    expect((await upload(picture(5001), 'big.png')).json).toEqual({ error: 'file is larger than HERALD_FILE_MAX_BYTES' });
    const big = await upload(picture(5001), 'big.png');
    expect(big.status).toBe(413);
    const noName = await h.bridge.call('POST', '/mcp/files', { raw: picture(), headers: { 'content-type': 'image/png' } });
    expect(noName.status).toBe(400);
    expect(noName.json).toEqual({ error: 'filename is required: the filename query parameter or the X-Herald-Filename header' });
    expect((await upload(picture(), 'a/b.png')).json).toEqual({ error: 'filename must be 1..255 characters, without / \\ or control characters' });
    expect((await upload(Buffer.alloc(0), 'empty.png')).json).toEqual({ error: 'file must not be empty' });
    const byHeader = await h.bridge.call('POST', '/mcp/files', { raw: picture(), headers: { 'content-type': 'image/png', 'x-herald-filename': encodeURIComponent('héllo.png') } });
    expect(byHeader.status).toBe(201);
    expect(byHeader.json).toMatchObject({ filename: 'héllo.png' });
  });

  it('posts a picture once, with its attachment in Discord\'s shape, served by the sandbox CDN', async () => {
    const data = picture(900);
    const file = (await upload(data, 'chart.png')).json as { file: string };
    const id = newRequestId();
    const accepted = await h.bridge.post('/mcp/deliveries', postWith(id, [{ file: file.file, filename: 'chart.png', description: 'the chart' }], 'a chart'));
    expect(accepted.status).toBe(202);
    expect(accepted.json).toMatchObject({ state: { state: 'pending', body: { content: 'a chart', attachments: [{ file: file.file, filename: 'chart.png', description: 'the chart' }] } }, existing: false });
    await h.waitForState(id, 'delivered');
    const sent = h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.content === 'a chart');
    expect(sent).toHaveLength(1);
    const attachment = sent[0]?.attachments?.[0];
    expect(sent[0]?.attachments).toHaveLength(1);
    expect(attachment).toMatchObject({ filename: 'chart.png', description: 'the chart', content_type: 'image/png', size: 900 });
    expect(Object.keys(attachment ?? {}).sort()).toEqual(['content_type', 'description', 'filename', 'id', 'proxy_url', 'size', 'url']);
    const cdn = await fetch(attachment?.url ?? '');
    expect(Buffer.from(await cdn.arrayBuffer()).equals(data)).toBe(true);
    // A retry of the same request answers the stored delivery and sends nothing.
    const again = await h.bridge.post('/mcp/deliveries', postWith(id, [{ file: file.file, filename: 'chart.png', description: 'the chart' }], 'a chart'));
    expect(again.json).toMatchObject({ existing: true, state: { state: 'delivered' } });
    expect(h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.content === 'a chart')).toHaveLength(1);
  });

  it('answers 422 for the same request_id with other bytes', async () => {
    const one = (await upload(picture(), 'x.png')).json as { file: string };
    const other = (await upload(picture(), 'x.png')).json as { file: string };
    const id = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', postWith(id, [{ file: one.file, filename: 'x.png' }]))).status).toBe(202);
    const reused = await h.bridge.post('/mcp/deliveries', postWith(id, [{ file: other.file, filename: 'x.png' }]));
    expect(reused.status).toBe(422);
    expect(reused.json).toEqual({ error: 'request_id was already used for a different request' });
  });

  it('refuses limits and unknown files before anything is queued, naming the field', async () => {
    const cases: [unknown, string][] = [
      [[{ file: 'f'.repeat(64), filename: 'gone.png' }], 'body.attachments[].file is not a stored file: upload it with POST /mcp/files'],
      [[{ file: 'nope', filename: 'x.png' }], 'body.attachments[].file must be a file id from POST /mcp/files'],
      [[{ file: 'f'.repeat(64), filename: '' }], 'body.attachments[].filename must be 1..255 characters, without / \\ or control characters'],
      [{}, 'body.attachments must be an array'],
      [Array.from({ length: 11 }, () => ({ file: 'f'.repeat(64), filename: 'x.png' })), 'body.attachments must have at most 10 items'],
    ];
    const over = (await upload(picture(4000), 'over.png')).json as { file: string };
    cases.push([[{ file: over.file, filename: 'over.png' }], "body.attachments[].file is larger than the platform's limit for one file"]);
    for (const [attachments, reason] of cases) {
      const id = newRequestId();
      const res = await h.bridge.post('/mcp/deliveries', postWith(id, attachments));
      expect(res.status, reason).toBe(400);
      expect(res.json).toEqual({ error: reason });
      expect((await h.bridge.get(`/mcp/deliveries/${id}`)).status).toBe(404);
    }
  });

  it('fetches an attachment of a readable message once, and refuses a channel the agent cannot read', async () => {
    const data = picture(800);
    const file = (await upload(data, 'in.png')).json as { file: string };
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', postWith(id, [{ file: file.file, filename: 'in.png' }], 'to fetch'));
    await h.waitForState(id, 'delivered');
    const message = h.sandbox.channelMessages(IDS.channels.alerts).find((m) => m.content === 'to fetch');
    const attachment = message?.attachments?.[0];
    const request = { channel_id: IDS.channels.alerts, message_id: message?.id, attachment_id: attachment?.id };
    const before = h.sandbox.attachmentRequests.filter((a) => a === attachment?.id).length;
    const first = await h.bridge.post('/mcp/attachments/download', request);
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({ file: sha(data), sha256: sha(data), size: 800, content_type: 'image/png', filename: 'in.png', url: `/mcp/files/${sha(data)}` });
    const second = await h.bridge.post('/mcp/attachments/download', request);
    expect(second.json).toMatchObject({ file: sha(data), existing: true });
    // Fetched once from the CDN, however often it is asked for.
    expect(h.sandbox.attachmentRequests.filter((a) => a === attachment?.id).length - before).toBe(1);
    const missing = await h.bridge.post('/mcp/attachments/download', { ...request, attachment_id: '1234567' });
    expect(missing.status).toBe(404);
    expect(missing.json).toEqual({ error: 'attachment not found' });
    const unreadable = await h.bridge.post('/mcp/attachments/download', { ...request, channel_id: IDS.otherChannel });
    expect(unreadable.status).toBe(403);
    expect(unreadable.json).toEqual({ error: 'channel_id is not a channel the agent can read' });
    const bad = await h.bridge.post('/mcp/attachments/download', { ...request, message_id: 'x' });
    expect(bad.status).toBe(400);
    expect(bad.json).toEqual({ error: 'message_id must be a snowflake' });
  });

  it('sends a DM with a file to a registered user, and its attachment can be fetched from the DM channel', async () => {
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    const data = picture(500);
    const file = (await upload(data, 'dm.png')).json as { file: string };
    const id = newRequestId();
    const res = await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'dm', target: { user_id: IDS.user }, body: { content: 'a dm with a file', attachments: [{ file: file.file, filename: 'dm.png' }] } });
    expect(res.status).toBe(202);
    await h.waitForState(id, 'delivered');
    const sent = h.sandbox.allMessages().filter((m) => m.content === 'a dm with a file');
    expect(sent).toHaveLength(1);
    expect(sent[0]?.attachments?.map((a) => [a.filename, a.size])).toEqual([['dm.png', 500]]);
    const got = await h.bridge.post('/mcp/attachments/download', { channel_id: sent[0]?.channel_id, message_id: sent[0]?.id, attachment_id: sent[0]?.attachments?.[0]?.id });
    expect(got.status).toBe(200);
    expect(got.json).toMatchObject({ file: sha(data), existing: false });
  });

  it('answers a request without attachments as before (no attachments key echoed)', async () => {
    const id = newRequestId();
    const res = await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts' }, body: { content: 'plain' } });
    expect(res.text).toContain('"body":{"content":"plain"},"created_at"');
  });
});
