import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { deliveryNonce, type Delivery } from '../../src/modules/deliveries/delivery.js';
import type { MemoryPlatform } from '../../src/platforms/memory/memory-platform.js';
import type { Platform } from '../../src/platforms/platform.js';
import { upsertDestination } from '../../src/modules/destinations/destination.repository.js';
import { newRequestId } from '../support/herald.js';
import { CHANNEL, GUILD, startServices, USER, type Services } from '../support/services.js';
import { tablesOf } from '../../src/infra/db/tables.js';
import type { DestinationsDb } from '../../src/modules/destinations/destination.table.js';

const post = (content: string, destination: 'alerts' | 'ops' = 'alerts'): Delivery => ({ request_id: newRequestId(), kind: 'post', target: { guild_id: GUILD, destination }, body: { content } });
const dm = (content: string, userId = USER): Delivery => ({ request_id: newRequestId(), kind: 'dm', target: { user_id: userId }, body: { content } });
const edit = (ref: string, seq: number, content: string): Delivery => ({ request_id: newRequestId(), kind: 'edit', target: { message_ref: ref, seq }, body: { content } });

/** The deliveries module over the in-memory transport: the outbox, nonces, doubt, DMs and edits. */
describe('deliveries (service level, memory transport)', () => {
  let s: Services;
  beforeAll(async () => {
    s = await startServices();
    await s.destinations.set(GUILD, 'alerts', CHANNEL);
    await s.identity.register({ id: USER, username: 'ada', globalName: 'Ada' });
  });
  afterAll(() => s.close());
  beforeEach(() => s.memory.clearFaults());

  const sent = (content: string) => s.memory.messages.filter((m) => m.message.content === content);

  it('posts once to the mapped channel, with the delivery nonce as the idempotency key', async () => {
    const d = post('hello');
    const state = await s.deliver(d);
    expect(state['state']).toBe('delivered');
    const [m] = sent('hello');
    expect(sent('hello')).toHaveLength(1);
    expect(m?.idempotencyKey).toBe(deliveryNonce(d.request_id));
    expect(state['url']).toBe(`https://discord.com/channels/${GUILD}/${CHANNEL}/${m?.id}`);
  });

  it('sends to the transport the destination names, records it, and refuses one this process does not speak', async () => {
    const d = post('addressed');
    await s.deliver(d);
    const row = await s.store.db.selectFrom('deliveries').select(['transport']).where('request_id', '=', d.request_id).executeTakeFirst();
    expect(row?.transport).toBe('memory');
    await upsertDestination(tablesOf<DestinationsDb>(s.store.db), GUILD, 'digest', { transport: 'discord', channelId: CHANNEL }, new Date());
    const elsewhere: Delivery = { request_id: newRequestId(), kind: 'post', target: { guild_id: GUILD, destination: 'digest' }, body: { content: 'elsewhere' } };
    expect(await s.deliver(elsewhere)).toMatchObject({ state: 'failed', code: 'UPSTREAM_UNAVAILABLE' });
    const failed = await s.store.db.selectFrom('deliveries').select(['reason']).where('request_id', '=', elsewhere.request_id).executeTakeFirst();
    expect(failed?.reason).toBe('transport discord is not configured');
  });

  it('fails UPSTREAM_UNAVAILABLE for an unmapped destination, with no send', async () => {
    const d = post('nowhere', 'ops');
    expect(await s.deliver(d)).toMatchObject({ state: 'failed', code: 'UPSTREAM_UNAVAILABLE' });
    expect(sent('nowhere')).toHaveLength(0);
  });

  // The chaos campaign's pauses phase met it: the refusal could not be recorded (PostgreSQL down
  // for longer than the lease), the re-drive read the dead attempt's doubt, and the post stayed
  // `unknown` through every re-drive and re-POST.
  it.each([
    { name: 'a post to a destination mapped to nothing', d: post('died unmapped', 'ops') },
    { name: 'a delete of a message Herald never sent', d: { request_id: newRequestId(), kind: 'delete', target: { message_ref: 'f'.repeat(64) }, body: {} } as Delivery },
  ])('$name, whose process died mid-attempt, is refused again: no doubt is kept for it', async ({ d }) => {
    expect((await s.deliver(d))['state']).toBe('failed');
    // As the dead process left it: claimed, its lease expired, nothing recorded.
    const now = Date.now();
    await s.store.db
      .updateTable('deliveries')
      .set({ status: 'in_flight', attempts: 1, attempt_started_at: new Date(now - 2_000), lease_owner: 'dead', lease_expires_at: new Date(now - 1_000), failure_code: null, reason: null })
      .where('request_id', '=', d.request_id)
      .execute();
    s.worker.wake();
    expect((await s.deliver(d))['state']).toBe('failed');
    const row = await s.store.db.selectFrom('deliveries').select(['status', 'doubt_from']).where('request_id', '=', d.request_id).executeTakeFirstOrThrow();
    expect(row).toEqual({ status: 'failed', doubt_from: null });
    expect(sent('died unmapped')).toHaveLength(0);
  });

  it('a send that created the message but lost the answer is retried with the same key: one message', async () => {
    s.memory.inject({ op: 'send', afterCreate: true, failure: { kind: 'transient', detail: 'lost answer', mayHaveCreated: true } });
    expect((await s.deliver(post('lost answer')))['state']).toBe('delivered');
    expect(sent('lost answer')).toHaveLength(1);
  });

  it('a refusal for good fails at once; a transient failure that sent nothing is retried', async () => {
    s.memory.inject({ op: 'send', failure: { kind: 'rejected', detail: 'missing access' } });
    expect(await s.deliver(post('refused'))).toMatchObject({ state: 'failed', code: 'UPSTREAM_UNAVAILABLE' });
    s.memory.inject({ op: 'send', failure: { kind: 'transient', detail: 'rate limited' }, times: 2 });
    expect((await s.deliver(post('later')))['state']).toBe('delivered');
    expect(sent('later')).toHaveLength(1);
  });

  it('DMs a registered user through their DM channel; refuses one who closed DMs', async () => {
    const state = await s.deliver(dm('psst'));
    expect(state['state']).toBe('delivered');
    const [m] = sent('psst');
    expect(state['url']).toBe(`https://discord.com/channels/@me/${m?.channelId}/${m?.id}`);
    s.memory.addUser('222222222222222222', 'closed', { dmsClosed: true });
    await s.identity.register({ id: '222222222222222222', username: 'closed', globalName: null });
    const closed = dm('nope', '222222222222222222');
    expect(await s.deliver(closed)).toMatchObject({ state: 'failed', code: 'RECIPIENT_UNREACHABLE' });
  });

  it('applies edits in seq order and reports a lower seq unapplied without touching the message', async () => {
    const original = post('v0');
    await s.deliver(original);
    expect(await s.deliver(edit(original.request_id, 2, 'v2'))).toMatchObject({ state: 'delivered', applied: true });
    expect(await s.deliver(edit(original.request_id, 1, 'v1'))).toMatchObject({ state: 'delivered', applied: false });
    const [m] = sent('v2');
    expect(m?.edits).toBe(1);
  });
});

describe('a delivery in doubt, past the nonce window (service level)', () => {
  let s: Services;
  beforeAll(async () => {
    s = await startServices({ nonceWindowMs: 0, maxAttempts: 2 });
    await s.destinations.set(GUILD, 'alerts', CHANNEL);
  });
  afterAll(() => s.close());

  it('is found in history, not sent again', async () => {
    s.memory.inject({ op: 'send', afterCreate: true, failure: { kind: 'transient', detail: '502', mayHaveCreated: true } });
    const d = post('in doubt');
    const state = await s.deliver(d, 'delivered');
    const mine = s.memory.messages.filter((m) => m.message.content === 'in doubt');
    expect(mine).toHaveLength(1);
    expect(state['url']).toBe(`https://discord.com/channels/${GUILD}/${CHANNEL}/${mine[0]?.id}`);
  });
});

describe('a transport without edits (service level)', () => {
  let s: Services;
  beforeAll(async () => {
    // The memory platform with its editor facet taken away.
    const withoutEdits = (memory: MemoryPlatform): Platform => ({
      name: memory.name,
      idempotentSend: memory.idempotentSend,
      messageUrl: memory.messageUrl,
      sender: memory.sender,
      dms: memory.dms,
      history: memory.history,
      channels: memory.channels,
    });
    s = await startServices({ transport: withoutEdits });
    await s.destinations.set(GUILD, 'alerts', CHANNEL);
  });
  afterAll(() => s.close());

  it('refuses edits CAPABILITY_UNAVAILABLE at once, computed from the missing facet', async () => {
    const original = post('fixed');
    await s.deliver(original);
    expect(await s.deliver(edit(original.request_id, 1, 'changed'))).toMatchObject({ state: 'failed', code: 'CAPABILITY_UNAVAILABLE' });
  });
});
