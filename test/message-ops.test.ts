import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

// Issue 25: deletes and reactions, each exactly once, through discord.js against the sandbox.
describe('deletes and reactions', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
    await h.mapDestination();
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
  });
  afterAll(() => h.close());
  beforeEach(() => h.sandbox.clearFaults());

  const del = (id: string, ref: string, body?: unknown) => ({ request_id: id, kind: 'delete', target: { message_ref: ref }, ...(body !== undefined ? { body } : {}) });
  const react = (id: string, target: Record<string, unknown>, emoji: string, remove?: boolean) => ({ request_id: id, kind: 'reaction', target, body: { emoji, ...(remove !== undefined ? { remove } : {}) } });
  const posted = async (): Promise<{ ref: string; messageId: string; channelId: string; url: string }> => {
    const ref = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(ref, `msg ${ref}`));
    const s = await h.waitForState(ref, 'delivered');
    const m = h.sandbox.allMessages().find((x) => x.content === `msg ${ref}`);
    if (m === undefined) throw new Error('posted message not in the sandbox');
    return { ref, messageId: m.id, channelId: m.channel_id, url: String(s['url']) };
  };

  it('deletes Herald\'s own post once, by message_ref, and says so byte for byte', async () => {
    const { ref, messageId, channelId, url } = await posted();
    const id = newRequestId();
    const res = await h.bridge.post('/mcp/deliveries', del(id, ref));
    expect(res.status).toBe(202);
    const createdAt = (res.json as { state: { created_at: string } }).state.created_at;
    expect(res.text).toBe(`{"state":{"state":"pending","kind":"delete","target":{"message_ref":"${ref}"},"body":{},"created_at":"${createdAt}"},"existing":false}`);
    await h.waitForState(id, 'delivered');
    expect((await h.bridge.get(`/mcp/deliveries/${id}`)).text).toBe(
      `{"state":"delivered","kind":"delete","target":{"message_ref":"${ref}"},"body":{},"created_at":"${createdAt}","message_ref":"${ref}","url":"${url}"}`,
    );
    expect(h.sandbox.findMessage(channelId, messageId)).toBeUndefined();
    expect(h.sandbox.deleted.filter((d) => d.id === messageId)).toHaveLength(1);
    const detail = (await h.admin.get(`/admin/deliveries/${id}`)).json as Record<string, unknown>;
    expect(detail).toMatchObject({ kind: 'delete', state: 'delivered', channel_id: channelId, message_id: messageId });
    // The same request again is the same delete: existing, no second Discord call.
    const before = h.sandbox.requests.length;
    const again = await h.bridge.post('/mcp/deliveries', del(id, ref, {}));
    expect(again.json).toMatchObject({ existing: true, state: { state: 'delivered' } });
    expect(h.sandbox.requests.slice(before).filter((r) => r.method === 'DELETE')).toEqual([]);
  });

  it('a delete whose answer was lost is delivered: the retry finds the message gone (10008)', async () => {
    const { ref, messageId } = await posted();
    h.sandbox.inject({ method: 'DELETE', path: `/messages/${messageId}$`, action: 'drop_after_create', times: 1 });
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', del(id, ref));
    await h.waitForState(id, 'delivered');
    const deletes = h.sandbox.requests.filter((r) => r.method === 'DELETE' && r.path.endsWith(`/messages/${messageId}`));
    expect(deletes.length).toBeGreaterThanOrEqual(2);
    expect(deletes.at(-1)?.status).toBe(404);
    expect(h.sandbox.deleted.filter((d) => d.id === messageId)).toHaveLength(1);
  });

  it('refuses to delete anything but Herald\'s delivered post or DM (NOT_FOUND), with no Discord call', async () => {
    const { ref } = await posted();
    const edit = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: edit, kind: 'edit', target: { message_ref: ref, seq: 1 }, body: { content: 'v2' } });
    await h.waitForState(edit, 'delivered');
    const before = h.sandbox.requests.filter((r) => r.method === 'DELETE').length;
    for (const target of [newRequestId(), edit]) {
      const id = newRequestId();
      await h.bridge.post('/mcp/deliveries', del(id, target));
      expect(await h.waitForState(id, 'failed')).toMatchObject({ code: 'NOT_FOUND' });
    }
    expect(h.sandbox.requests.filter((r) => r.method === 'DELETE').length).toBe(before);
  });

  it('an edit after a delete fails NOT_FOUND, plainly', async () => {
    const { ref } = await posted();
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', del(id, ref));
    await h.waitForState(id, 'delivered');
    const edit = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: edit, kind: 'edit', target: { message_ref: ref, seq: 1 }, body: { content: 'too late' } });
    expect(await h.waitForState(edit, 'failed')).toMatchObject({ code: 'NOT_FOUND' });
    expect(((await h.admin.get(`/admin/deliveries/${edit}`)).json as { reason: string }).reason).toMatch(/deleted/);
  });

  it('adds a reaction once, on Herald\'s post or by destination and message id, and removes it', async () => {
    const { ref, messageId, channelId } = await posted();
    const a = newRequestId();
    await h.bridge.post('/mcp/deliveries', react(a, { message_ref: ref }, '👍'));
    expect(await h.waitForState(a, 'delivered')).toMatchObject({ message_ref: ref });
    // The same emoji by the other form: Discord's PUT is idempotent, still one reaction by Herald.
    const b = newRequestId();
    await h.bridge.post('/mcp/deliveries', react(b, { guild_id: IDS.guild, destination: 'alerts', message_id: messageId }, '👍'));
    expect(await h.waitForState(b, 'delivered')).toMatchObject({ message_ref: b });
    expect(h.sandbox.findMessage(channelId, messageId)?.reactions).toEqual([{ emoji: '👍', users: [h.sandbox.bot.id] }]);
    const c = newRequestId();
    await h.bridge.post('/mcp/deliveries', react(c, { message_ref: ref }, '👍', true));
    await h.waitForState(c, 'delivered');
    expect(h.sandbox.findMessage(channelId, messageId)?.reactions ?? []).toEqual([]);
    // remove: false is the same request as no remove.
    const again = await h.bridge.post('/mcp/deliveries', react(a, { message_ref: ref }, '👍', false));
    expect(again.json).toMatchObject({ existing: true });
  });

  it('a reaction whose answer was lost is one reaction', async () => {
    const { ref, messageId, channelId } = await posted();
    h.sandbox.inject({ method: 'PUT', path: '/reactions/', action: 'drop_after_create', times: 2 });
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', react(id, { message_ref: ref }, 'party:123456789012345678'));
    await h.waitForState(id, 'delivered');
    expect(h.sandbox.findMessage(channelId, messageId)?.reactions).toEqual([{ emoji: 'party:123456789012345678', users: [h.sandbox.bot.id] }]);
  });

  it('a reaction in doubt on a message since gone fails NOT_FOUND, not unknown for ever', async () => {
    // The chaos campaign met it: a reaction whose answer was lost, then its message deleted; the
    // retry's 404 came after a call that may have acted, and every re-drive and re-POST ended unknown.
    const { ref } = await posted();
    // Every try of the first attempt answered 500 (it may have acted: in doubt), then the message is gone.
    h.sandbox.inject({ method: 'PUT', path: '/reactions/', action: 'error', status: 500, times: 3 });
    h.sandbox.inject({ method: 'PUT', path: '/reactions/', action: 'error', status: 404, code: 10008, times: 1 });
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', react(id, { message_ref: ref }, '🎉'));
    expect(await h.waitForState(id, 'failed')).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('reacts in the DM with a registered user by user_id and message_id', async () => {
    const dm = newRequestId();
    await h.bridge.post('/mcp/deliveries', { request_id: dm, kind: 'dm', target: { user_id: IDS.user }, body: { content: `dm ${dm}` } });
    await h.waitForState(dm, 'delivered');
    const m = h.sandbox.allMessages().find((x) => x.content === `dm ${dm}`);
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', react(id, { user_id: IDS.user, message_id: m?.id ?? '' }, '✅'));
    await h.waitForState(id, 'delivered');
    expect(m?.reactions).toEqual([{ emoji: '✅', users: [h.sandbox.bot.id] }]);
  });

  it('fails a reaction on a message not in that channel NOT_FOUND, and an unknown emoji plainly', async () => {
    const missing = newRequestId();
    await h.bridge.post('/mcp/deliveries', react(missing, { guild_id: IDS.guild, destination: 'alerts', message_id: '123456789012345678' }, '👍'));
    expect(await h.waitForState(missing, 'failed')).toMatchObject({ code: 'NOT_FOUND' });
    const { ref } = await posted();
    const bad = newRequestId();
    await h.bridge.post('/mcp/deliveries', react(bad, { message_ref: ref }, 'thumbsup'));
    expect(await h.waitForState(bad, 'failed')).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE' });
  });

  it('refuses bad requests with the contract\'s reason, naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ request_id: newRequestId(), kind: 'delete', target: {} }, 'target.message_ref must be a lowercase 64-character hex string'],
      [{ request_id: newRequestId(), kind: 'delete', body: 'x', target: { message_ref: newRequestId() } }, 'body must be an object'],
      [{ request_id: newRequestId(), kind: 'reaction', target: { message_ref: newRequestId() } }, 'body must be an object'],
      [{ request_id: newRequestId(), kind: 'reaction', body: {}, target: { message_ref: newRequestId() } }, 'body.emoji must be a unicode emoji or name:id (1..64 characters, no spaces)'],
      [{ request_id: newRequestId(), kind: 'reaction', body: { emoji: '👍', remove: 'yes' }, target: { message_ref: newRequestId() } }, 'body.remove must be a boolean'],
      [{ request_id: newRequestId(), kind: 'reaction', body: { emoji: '👍' }, target: { guild_id: IDS.guild } }, 'target must give message_ref, or guild_id with destination and message_id, or user_id with message_id'],
      [{ request_id: newRequestId(), kind: 'reaction', body: { emoji: '👍' }, target: { user_id: IDS.user, message_id: 'x' } }, 'target.message_id must be a message id (a snowflake, or a Slack ts such as 1700000000.000100)'],
      [{ request_id: newRequestId(), kind: 'nope', body: {}, target: {} }, 'kind must be "post", "dm" or "edit"'],
    ];
    for (const [body, error] of cases) {
      const res = await h.bridge.post('/mcp/deliveries', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json).toEqual({ error });
    }
  });

  it('lists per platform what it supports only when asked; the plain answer is unchanged', async () => {
    const plain = await h.bridge.get('/mcp/capabilities');
    expect(Object.keys(plain.json as object)).toEqual(['dm', 'targeted_post', 'cards', 'edit', 'destinations']);
    const full = await h.bridge.get('/mcp/capabilities?include=platforms');
    expect(full.status).toBe(200);
    expect((full.json as { platforms: unknown }).platforms).toEqual([{ name: 'discord', files: true, reactions: true, replies: true, threads: true, deletes: true }]);
  });
});
