import { describe, expect, it } from 'vitest';
import { client } from './support/client.js';
import { IDS, newRequestId, post } from './support/herald.js';
import { crashRig } from './support/rigs.js';
import { waitFor, waitForDelivery } from './support/wait.js';

/**
 * Issue 25 with real processes: a reaction and a delete whose Discord call was made, SIGKILLed
 * before Herald recorded the answer, are re-driven by the restarted Herald: one reaction, one delete.
 */
describe('a reaction and a delete re-driven after a SIGKILL', () => {
  const { sandbox, procs, bridgeToken, adminToken, database, env } = crashRig({ env: { HERALD_DISCORD_TIMEOUT_MS: '1000', HERALD_LEASE_MS: '2500' } });

  /** A delivered post, then `act` sent with Discord's answer held back; SIGKILL once `done` shows Discord did it. */
  async function actThenKill(act: (ref: string, messageId: string) => Record<string, unknown>, method: string, done: (messageId: string) => boolean): Promise<{ id: string; messageId: string }> {
    const first = await procs.start(['serve'], env());
    const api = client(first.url ?? '', bridgeToken);
    expect((await client(first.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts })).status).toBe(200);
    const ref = newRequestId();
    const content = `crash-op ${ref}`;
    await api.post('/mcp/deliveries', post(ref, content));
    await waitForDelivery(api, ref, 'delivered', 'the post');
    const messageId = sandbox.allMessages().find((m) => m.content === content)?.id ?? '';
    sandbox.inject({ method, path: `/messages/${messageId}`, action: 'delay_after_create', ms: 60_000 });
    const request = act(ref, messageId);
    expect((await api.post('/mcp/deliveries', request)).status).toBe(202);
    await waitFor(() => done(messageId), 'Discord to act');
    first.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    sandbox.clearFaults();
    return { id: String(request['request_id']), messageId };
  }

  it('a reaction: one reaction by Herald after the re-drive', async () => {
    await database();
    const reacted = (messageId: string) => (sandbox.allMessages().find((m) => m.id === messageId)?.reactions?.length ?? 0) > 0;
    const { id, messageId } = await actThenKill((ref) => ({ request_id: newRequestId(), kind: 'reaction', target: { message_ref: ref }, body: { emoji: '🚀' } }), 'PUT', reacted);
    const second = await procs.start(['serve'], env());
    await waitForDelivery(client(second.url ?? '', bridgeToken), id, 'delivered', 'the re-driven reaction').catch((e: unknown) => {
      throw new Error(`${String(e)}\n${second.output()}`);
    });
    expect(sandbox.allMessages().find((m) => m.id === messageId)?.reactions).toEqual([{ emoji: '🚀', users: [sandbox.bot.id] }]);
    expect(sandbox.requests.filter((r) => r.method === 'PUT' && r.path.includes(`/messages/${messageId}/reactions/`)).length).toBeGreaterThanOrEqual(2);
  }, 180_000);

  it('a delete: the re-drive finds the message gone (10008) and is delivered; one delete', async () => {
    await database();
    const gone = (messageId: string) => sandbox.deleted.some((d) => d.id === messageId);
    const { id, messageId } = await actThenKill((ref) => ({ request_id: newRequestId(), kind: 'delete', target: { message_ref: ref } }), 'DELETE', gone);
    const second = await procs.start(['serve'], env());
    await waitForDelivery(client(second.url ?? '', bridgeToken), id, 'delivered', 'the re-driven delete').catch((e: unknown) => {
      throw new Error(`${String(e)}\n${second.output()}`);
    });
    expect(sandbox.deleted.filter((d) => d.id === messageId)).toHaveLength(1);
    const deletes = sandbox.requests.filter((r) => r.method === 'DELETE' && r.path.endsWith(`/messages/${messageId}`));
    expect(deletes.length).toBeGreaterThanOrEqual(2);
    expect(deletes.at(-1)?.status).toBe(404);
  }, 180_000);
});
