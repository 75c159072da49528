import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { client } from './support/client.js';
import { IDS, newRequestId } from './support/herald.js';
import { crashRig, type DiscordSandbox } from './support/rigs.js';
import { waitFor, waitForDelivery } from './support/wait.js';

/**
 * Issue 25, point 7: a file post whose create succeeded and whose answer was lost (the process
 * SIGKILLed while Discord's answer is held back) gives one message with its files, whether the
 * restarted Herald re-drives it inside the nonce window (Discord answers the multipart resend with
 * the message already created) or past it (found in the channel's history, files' names included).
 */
describe('a file post killed between Discord accepting and the commit', () => {
  const { sandbox, procs, bridgeToken, adminToken, database, env, forgetfulDiscord } = crashRig({ sandbox: { mediaMessages: 0 }, env: { HERALD_DISCORD_TIMEOUT_MS: '1000', HERALD_LEASE_MS: '2500' } });

  async function postFileAndKill(discord: DiscordSandbox, id: string, content: string, extra: Record<string, string>): Promise<Buffer> {
    const first = await procs.start(['serve'], env(extra));
    const api = client(first.url ?? '', bridgeToken);
    expect((await client(first.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts })).status).toBe(200);
    const data = randomBytes(2048);
    const uploaded = await api.call('POST', '/mcp/files?filename=report.bin', { raw: data, headers: { 'content-type': 'application/octet-stream' } });
    expect(uploaded.status).toBe(201);
    const file = (uploaded.json as { file: string }).file;
    discord.inject({ method: 'POST', path: '/messages$', action: 'delay_after_create', ms: 60_000 });
    const body = { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts' }, body: { content, attachments: [{ file, filename: 'report.bin', description: 'the report' }] } };
    expect((await api.post('/mcp/deliveries', body)).status).toBe(202);
    await waitFor(() => discord.allMessages().filter((m) => m.content === content).length === 1, 'Discord to create the message');
    first.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    discord.clearFaults();
    return data;
  }

  async function expectOneMessageWithItsFile(discord: DiscordSandbox, id: string, content: string, data: Buffer, extra: Record<string, string>): Promise<void> {
    const second = await procs.start(['serve'], env(extra));
    const api = client(second.url ?? '', bridgeToken);
    const state = await waitForDelivery(api, id, 'delivered', 'the re-driven file post').catch((e: unknown) => {
      throw new Error(`${String(e)}\n${second.output()}`);
    });
    const sent = discord.allMessages().filter((m) => m.content === content);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.attachments?.map((a) => [a.filename, a.description, a.size])).toEqual([['report.bin', 'the report', data.length]]);
    expect(state['url']).toBe(`https://discord.com/channels/${IDS.guild}/${IDS.channels.alerts}/${sent[0]?.id}`);
    const cdn = await fetch(sent[0]?.attachments?.[0]?.url ?? '');
    expect(Buffer.from(await cdn.arrayBuffer()).equals(data)).toBe(true);
  }

  it('inside the nonce window: the multipart resend is answered with the message already created', async () => {
    await database();
    const id = newRequestId();
    const content = `file-crash-nonce ${id}`;
    const data = await postFileAndKill(sandbox, id, content, {});
    await expectOneMessageWithItsFile(sandbox, id, content, data, {});
  }, 150_000);

  it('past the nonce window: the restarted Herald finds the file post in the channel instead of sending again', async () => {
    await database();
    const { discord: forgetful, pastWindow } = await forgetfulDiscord({ mediaMessages: 0 });
    const id = newRequestId();
    const content = `file-crash-reconcile ${id}`;
    const data = await postFileAndKill(forgetful, id, content, pastWindow);
    await expectOneMessageWithItsFile(forgetful, id, content, data, pastWindow);
    expect(forgetful.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/messages')).length).toBeGreaterThan(0);
  }, 150_000);
});
