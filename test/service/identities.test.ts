import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/modules/deliveries/delivery.js';
import { MemoryPlatform } from '../../src/platforms/memory/memory-platform.js';
import { newRequestId } from '../support/herald.js';
import { CHANNEL, GUILD, startServices, USER, type Services } from '../support/services.js';
import { waitFor } from '../support/wait.js';

const post = (content: string): Delivery => ({ request_id: newRequestId(), kind: 'post', target: { guild_id: GUILD, destination: 'alerts' }, body: { content } });

/**
 * Identities (src/infra/policy/identity.ts) on the service: a delivery is sent as the identity its
 * caller speaks as, or not at all; its state, its message and edits of it are that identity's alone.
 */
describe('deliveries as identities (service level, memory transport)', () => {
  let s: Services;
  // The bot `ops`: the same platform, its own account (its own messages).
  const ops = new MemoryPlatform();
  ops.addUser(USER, 'Ada').addChannel(CHANNEL, { guildId: GUILD, name: 'alerts', members: [USER] });
  beforeAll(async () => {
    s = await startServices({ identities: { ops } });
    await s.destinations.set(GUILD, 'alerts', CHANNEL);
  });
  afterAll(() => s.close());

  const on = (platform: MemoryPlatform, content: string) => platform.messages.filter((m) => m.message.content === content);

  it('sends as the caller’s identity: its message is that bot’s, none is the default bot’s', async () => {
    expect(await s.deliver(post('from ops'), undefined, 'ops')).toMatchObject({ state: 'delivered' });
    expect(on(ops, 'from ops')).toHaveLength(1);
    expect(on(s.memory, 'from ops')).toHaveLength(0);
    expect(await s.deliver(post('from default'))).toMatchObject({ state: 'delivered' });
    expect(on(s.memory, 'from default')).toHaveLength(1);
    expect(on(ops, 'from default')).toHaveLength(0);
  });

  it('shows a delivery to its own identity only; the same request_id from another is a reuse (422), not its state', async () => {
    const d = post('mine');
    await s.deliver(d, undefined, 'ops');
    await expect(s.deliveries.get(d.request_id)).rejects.toMatchObject({ name: 'NotFoundError' });
    await expect(s.deliveries.get(d.request_id, 'support')).rejects.toMatchObject({ name: 'NotFoundError' });
    await expect(s.deliveries.accept(d)).rejects.toMatchObject({ name: 'ConflictError' });
    expect((await s.deliveries.accept(d, 'ops')).existing).toBe(true);
    expect(on(ops, 'mine')).toHaveLength(1);
  });

  it('edits act only on messages sent as the same identity (deletes and reactions: test/identities.test.ts)', async () => {
    const original = post('ops original');
    await s.deliver(original, undefined, 'ops');
    const edit = (content: string): Delivery => ({ request_id: newRequestId(), kind: 'edit', target: { message_ref: original.request_id, seq: 1 }, body: { content } });
    expect(await s.deliver(edit('default edits ops'))).toMatchObject({ state: 'failed', code: 'NOT_FOUND' });
    expect(on(ops, 'ops original')).toHaveLength(1);
    expect(await s.deliver(edit('ops edits its own'), undefined, 'ops')).toMatchObject({ state: 'delivered' });
    expect(on(ops, 'ops edits its own')).toHaveLength(1);
  });

  it("one bot's twin never holds back another's: the same post from two identities, the first retrying after a 429", async () => {
    // The default bot is rate limited for a minute (its own limit): its post waits, pending.
    s.memory.inject({ op: 'send', failure: { kind: 'transient', retryAfterMs: 60_000, detail: '429' }, times: 1 });
    const first = post('deploy done');
    await s.deliveries.accept(first);
    s.worker.wake();
    await waitFor(async () => {
      const row = await s.store.db.selectFrom('deliveries').select(['status', 'attempts']).where('request_id', '=', first.request_id).executeTakeFirst();
      return row?.status === 'pending' && row.attempts === 1;
    }, 'the default bot’s refused first attempt');
    // The ops bot's identical post is its own message, by its own author: it goes now (the
    // default bot's twin would have held it back for the minute).
    expect(await s.deliver(post('deploy done'), undefined, 'ops')).toMatchObject({ state: 'delivered' });
    expect(on(ops, 'deploy done')).toHaveLength(1);
    expect((await s.deliveries.get(first.request_id))['state']).toBe('pending');
  });

  it('refuses a delivery for an identity this Herald is not configured with: nothing is sent', async () => {
    const before = s.memory.messages.length + ops.messages.length;
    expect(await s.deliver(post('nobody'), undefined, 'support')).toMatchObject({ state: 'failed', code: 'UPSTREAM_UNAVAILABLE' });
    const row = await s.store.db.selectFrom('deliveries').select(['reason']).where('identity', '=', 'support').executeTakeFirst();
    expect(row?.reason).toBe('identity support is not configured on this Herald');
    expect(s.memory.messages.length + ops.messages.length).toBe(before);
  });
});
