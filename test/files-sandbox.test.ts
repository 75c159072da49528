import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_IDS } from '../src/platforms/discord/sandbox/ids.js';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';

/**
 * The sandbox takes files as Discord does (multipart, `payload_json` + `files[n]`) and refuses
 * what Discord refuses with Discord's own answer: a file over the limit is 413, code 40005.
 */
describe("the sandbox's file uploads", () => {
  let sandbox: DiscordSandbox;
  beforeAll(async () => {
    sandbox = await new DiscordSandbox({ mediaMessages: 0, maxFileBytes: 1000 }).start();
  });
  afterAll(() => sandbox.close());

  const create = async (files: { size: number; name: string }[], payload: Record<string, unknown>): Promise<Response> => {
    const form = new FormData();
    form.append('payload_json', JSON.stringify(payload));
    files.forEach((f, i) => form.append(`files[${i}]`, new Blob([Buffer.alloc(f.size, 7)], { type: 'image/png' }), f.name));
    return fetch(`${sandbox.url}/api/v10/channels/${SANDBOX_IDS.channels.alerts}/messages`, { method: 'POST', headers: { authorization: `Bot ${sandbox.botToken}` }, body: form });
  };

  it('stores attachments in Discord\'s shape, named and described by payload_json', async () => {
    const res = await create([{ size: 10, name: 'a.png' }], { content: 'shape', attachments: [{ id: 0, filename: 'shown.png', description: 'alt' }] });
    expect(res.status).toBe(200);
    const m = (await res.json()) as { attachments: Record<string, unknown>[] };
    expect(m.attachments).toEqual([
      expect.objectContaining({ filename: 'shown.png', description: 'alt', content_type: 'image/png', size: 10, url: expect.stringContaining('/attachments/'), proxy_url: expect.stringContaining('/media-proxy/attachments/') }),
    ]);
  });

  it('refuses a file over the limit with 413 code 40005, creating nothing', async () => {
    const before = sandbox.channelMessages(SANDBOX_IDS.channels.alerts).length;
    const res = await create([{ size: 1001, name: 'big.png' }], { content: 'too big' });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({ message: 'Request entity too large', code: 40005 });
    expect(sandbox.channelMessages(SANDBOX_IDS.channels.alerts).length).toBe(before);
  });

  it('refuses more than 10 files', async () => {
    const res = await create(Array.from({ length: 11 }, (_, i) => ({ size: 1, name: `${i}.png` })), { content: 'many' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: number }).code).toBe(50035);
  });
});
