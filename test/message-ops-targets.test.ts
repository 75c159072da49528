import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DELIVERY_KINDS } from '../src/modules/deliveries/delivery.jobs.js';
import { tablesOf } from '../src/infra/db/tables.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';
import { newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/**
 * An edit, a delete and a `message_ref` reaction act only on Herald's own delivered post or DM.
 * Every other kind a delivery row can hold (a reaction, a delete, an edit, a handoff, a command's
 * reply, a chat send, and any kind added later: the walk is over DELIVERY_KINDS) is NOT_FOUND, with
 * no call to Discord, even when its row names a real message.
 */
describe('what an edit, a delete or a reaction may name by message_ref', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
    await h.mapDestination();
  });
  afterAll(() => h.close());

  const edit = (ref: string, content: string) => ({ request_id: newRequestId(), kind: 'edit', target: { message_ref: ref, seq: 1 }, body: { content } });
  const del = (ref: string) => ({ request_id: newRequestId(), kind: 'delete', target: { message_ref: ref } });
  const react = (ref: string, emoji = '👍') => ({ request_id: newRequestId(), kind: 'reaction', target: { message_ref: ref }, body: { emoji } });
  /** Calls that would change the message: an edit (PATCH), a delete, a reaction (PUT). */
  const touching = (messageId: string) => h.sandbox.requests.filter((r) => r.method !== 'GET' && r.method !== 'POST' && r.path.includes(`/messages/${messageId}`));
  const posted = async () => {
    const ref = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(ref, `original ${ref}`));
    const state = await h.waitForState(ref, 'delivered');
    const message = await waitFor(() => h.sandbox.allMessages().find((m) => m.content === `original ${ref}`), 'the post in the sandbox');
    return { ref, url: String(state['url']), message };
  };
  const outcome = async (body: { request_id: string }) => {
    expect((await h.bridge.post('/mcp/deliveries', body)).status).toBe(202);
    return waitFor(async () => {
      const state = (await h.bridge.get(`/mcp/deliveries/${body.request_id}`)).json as { state: string; code?: string };
      return state.state === 'delivered' || state.state === 'failed' ? state : undefined;
    }, `${body.request_id} to finish`);
  };

  it('an edit naming a reaction (as the review did) fails NOT_FOUND and never rewrites the message it was on', async () => {
    const { ref, message } = await posted();
    const reaction = react(ref);
    expect(await outcome(reaction)).toMatchObject({ state: 'delivered' });
    const before = touching(message.id).length;
    expect(await outcome(edit(reaction.request_id, 'rewritten through a reaction'))).toMatchObject({ state: 'failed', code: 'NOT_FOUND' });
    expect(touching(message.id).length).toBe(before);
    expect(h.sandbox.findMessage(message.channel_id, message.id)?.content).toBe(`original ${ref}`);
  });

  it('walks every stored kind but post and dm: a delivered row of it naming a real message is no target', async () => {
    const { ref: postRef, url, message } = await posted();
    const db = tablesOf<DeliveriesDb>(h.herald.store.db);
    const now = new Date();
    const others = DELIVERY_KINDS.filter((kind) => kind !== 'post' && kind !== 'dm');
    // Every kind there is, so this walk covers the next one added.
    expect(others.length).toBe(DELIVERY_KINDS.length - 2);
    for (const kind of others) {
      const ref = newRequestId();
      await db
        .insertInto('deliveries')
        .values({ request_id: ref, kind, target: '{}', body: '{}', payload_hash: ref, status: 'delivered', created_at: now, next_attempt_at: now, transport: 'discord', channel_id: message.channel_id, message_id: message.id, url })
        .execute();
      for (const body of [edit(ref, `rewritten through a ${kind}`), del(ref), react(ref)]) {
        expect({ kind, op: body.kind, answer: await outcome(body) }).toEqual({ kind, op: body.kind, answer: expect.objectContaining({ state: 'failed', code: 'NOT_FOUND' }) });
      }
    }
    expect(touching(message.id)).toEqual([]);
    expect(h.sandbox.findMessage(message.channel_id, message.id)?.content).toBe(message.content);
    // The message itself (a post) is still a target: the walk refused the kinds, not the message.
    expect(await outcome(edit(postRef, 'edited as a post'))).toMatchObject({ state: 'delivered' });
    expect(h.sandbox.findMessage(message.channel_id, message.id)?.content).toBe('edited as a post');
  });

  it("walks every stored kind: a connector reads back only the protocol's kinds, an operator also a command's reply", async () => {
    const db = tablesOf<DeliveriesDb>(h.herald.store.db);
    const now = new Date();
    const wire = ['post', 'dm', 'edit', 'delete', 'reaction'];
    for (const kind of DELIVERY_KINDS) {
      const ref = newRequestId();
      await db.insertInto('deliveries').values({ request_id: ref, kind, target: '{}', body: '{}', payload_hash: ref, status: 'failed', created_at: now, next_attempt_at: now }).execute();
      // Status only (the rows are bare, not valid deliveries): read past the contract-checking client.
      const status = async (path: string, token: string) => (await fetch(`${h.url}${path}`, { headers: { authorization: `Bearer ${token}` } })).status;
      const connector = await status(`/mcp/deliveries/${ref}`, h.bridgeToken);
      const operator = await status(`/admin/deliveries/${ref}`, h.adminToken);
      expect({ kind, connector, operator }).toEqual({ kind, connector: wire.includes(kind) ? 200 : 404, operator: wire.includes(kind) || kind === 'reply' ? 200 : 404 });
    }
  });
});
