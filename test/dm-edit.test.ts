import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IDS, newRequestId, post, startTestHerald, TestClock, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

// docs/protocol.md §6: dm and edit.
describe('DMs and edits', () => {
  const clock = new TestClock();
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ clock });
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
    await h.mapDestination();
    await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
  });
  afterAll(() => h.close());
  beforeEach(() => h.sandbox.clearFaults());

  const dm = (id: string, content: string, userId: string = IDS.user) => ({ request_id: id, kind: 'dm', target: { user_id: userId }, body: { content } });
  const edit = (id: string, ref: string, seq: number, body: Record<string, unknown>) => ({ request_id: id, kind: 'edit', target: { message_ref: ref, seq }, body });
  const dmChannel = () => [...h.sandbox.channels.values()].find((c) => c.type === 1 && c.recipients?.[0]?.id === IDS.user);

  it('delivers a DM to a registered user once, through their DM channel, with an @me url', async () => {
    const id = newRequestId();
    const res = await h.bridge.post('/mcp/deliveries', dm(id, `dm ${id}`));
    const createdAt = (res.json as { state: { created_at: string } }).state.created_at;
    expect(res.text).toBe(`{"state":{"state":"pending","kind":"dm","target":{"user_id":"${IDS.user}"},"body":{"content":"dm ${id}"},"created_at":"${createdAt}"},"existing":false}`);
    await h.waitForState(id, 'delivered');
    const channel = dmChannel();
    const sent = h.sandbox.channelMessages(channel?.id ?? '').filter((m) => m.content === `dm ${id}`);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.allowed_mentions).toEqual({ parse: [] });
    const get = await h.bridge.get(`/mcp/deliveries/${id}`);
    expect(get.text).toBe(
      `{"state":"delivered","kind":"dm","target":{"user_id":"${IDS.user}"},"body":{"content":"dm ${id}"},"created_at":"${createdAt}","message_ref":"${id}","url":"https://discord.com/channels/@me/${channel?.id}/${sent[0]?.id}"}`,
    );
  });

  it('fails a DM to an unregistered user RECIPIENT_UNREACHABLE with no Discord call', async () => {
    const stranger = '987654321098765432';
    h.sandbox.addUser({ id: stranger, username: 'stranger', global_name: null });
    const before = h.sandbox.requests.length;
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', dm(id, 'hi', stranger));
    const state = await h.waitForState(id, 'failed');
    expect(state['code']).toBe('RECIPIENT_UNREACHABLE');
    expect(h.sandbox.requests.slice(before)).toEqual([]);
  });

  it('maps Discord 50007 (the user does not accept DMs) to RECIPIENT_UNREACHABLE', async () => {
    const closed = '876543210987654321';
    h.sandbox.addUser({ id: closed, username: 'closed', global_name: 'Closed', dms_closed: true });
    await h.sandbox.invoke({ userId: closed, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', dm(id, 'hi', closed));
    expect((await h.waitForState(id, 'failed'))['code']).toBe('RECIPIENT_UNREACHABLE');
  });

  it('applies edits in seq order: seq 2 then seq 1 → applied true then false, one Discord edit', async () => {
    const original = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(original, `v1 ${original}`));
    await h.waitForState(original, 'delivered');
    const e2 = newRequestId();
    await h.bridge.post('/mcp/deliveries', edit(e2, original, 2, { content: `v2 ${original}` }));
    const s2 = await h.waitForState(e2, 'delivered');
    const e1 = newRequestId();
    await h.bridge.post('/mcp/deliveries', edit(e1, original, 1, { content: `v0 ${original}` }));
    const s1 = await h.waitForState(e1, 'delivered');
    const originalState = (await h.bridge.get(`/mcp/deliveries/${original}`)).json as { url: string };
    expect(s2).toMatchObject({ message_ref: original, url: originalState.url, applied: true });
    expect(s1).toMatchObject({ message_ref: original, url: originalState.url, applied: false });
    expect(Object.keys(s1)).toEqual(['state', 'kind', 'target', 'body', 'created_at', 'message_ref', 'url', 'applied']);
    const [m] = h.sandbox.allMessages().filter((x) => x.content === `v2 ${original}`);
    expect(m?.edits).toBe(1);
    expect(m?.allowed_mentions).toEqual({ parse: [] });
    // Equal seq applies again (idempotent); a card-only edit keeps the content.
    const e2b = newRequestId();
    await h.bridge.post('/mcp/deliveries', edit(e2b, original, 2, { card: { title: 'Card' } }));
    expect(await h.waitForState(e2b, 'delivered')).toMatchObject({ applied: true });
    expect(m?.content).toBe(`v2 ${original}`);
    expect(m?.embeds).toEqual([{ title: 'Card' }]);
  });

  it('edits a DM, and refuses once its user has unregistered', async () => {
    const user = '765432109876543210';
    h.sandbox.addUser({ id: user, username: 'leaver', global_name: null });
    await h.sandbox.invoke({ userId: user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    const original = newRequestId();
    await h.bridge.post('/mcp/deliveries', dm(original, 'dm v1', user));
    const delivered = await h.waitForState(original, 'delivered');
    expect(String(delivered['url'])).toMatch(/^https:\/\/discord\.com\/channels\/@me\//);
    const e1 = newRequestId();
    await h.bridge.post('/mcp/deliveries', edit(e1, original, 1, { content: 'dm v2' }));
    expect(await h.waitForState(e1, 'delivered')).toMatchObject({ applied: true, url: delivered['url'] });
    await h.sandbox.invoke({ userId: user, guildId: IDS.guild, command: 'agent', subcommand: 'unregister' });
    const e2 = newRequestId();
    await h.bridge.post('/mcp/deliveries', edit(e2, original, 2, { content: 'dm v3' }));
    expect((await h.waitForState(e2, 'failed'))['code']).toBe('RECIPIENT_UNREACHABLE');
  });

  it('fails NOT_FOUND for an unknown original, an undelivered one, and an edit of an edit', async () => {
    const missing = newRequestId();
    const e1 = newRequestId();
    await h.bridge.post('/mcp/deliveries', edit(e1, missing, 1, { content: 'x' }));
    expect((await h.waitForState(e1, 'failed'))['code']).toBe('NOT_FOUND');

    const unmapped = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(unmapped, 'nowhere', 'deals'));
    await h.waitForState(unmapped, 'failed');
    const e2 = newRequestId();
    await h.bridge.post('/mcp/deliveries', edit(e2, unmapped, 1, { content: 'x' }));
    expect((await h.waitForState(e2, 'failed'))['code']).toBe('NOT_FOUND');

    const original = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(original, 'orig'));
    await h.waitForState(original, 'delivered');
    const first = newRequestId();
    await h.bridge.post('/mcp/deliveries', edit(first, original, 1, { content: 'x' }));
    await h.waitForState(first, 'delivered');
    const e3 = newRequestId();
    await h.bridge.post('/mcp/deliveries', edit(e3, first, 1, { content: 'y' }));
    expect((await h.waitForState(e3, 'failed'))['code']).toBe('NOT_FOUND');
  });

  it('fails UPSTREAM_UNAVAILABLE when Discord rejects the edit (message deleted)', async () => {
    const original = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(original, `gone ${original}`));
    await h.waitForState(original, 'delivered');
    h.sandbox.inject({ method: 'PATCH', action: 'error', status: 404, code: 10008 });
    const e = newRequestId();
    await h.bridge.post('/mcp/deliveries', edit(e, original, 1, { content: 'x' }));
    expect((await h.waitForState(e, 'failed'))['code']).toBe('UPSTREAM_UNAVAILABLE');
  });

  it('makes an edit of a pruned original NOT_FOUND', async () => {
    const original = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(original, `old ${original}`));
    await h.waitForState(original, 'delivered');
    clock.offsetMs += 8 * 24 * 3600_000 + 60_000;
    await h.herald.worker?.prune();
    const e = newRequestId();
    await h.bridge.post('/mcp/deliveries', edit(e, original, 1, { content: 'x' }));
    expect((await h.waitForState(e, 'failed'))['code']).toBe('NOT_FOUND');
  });
});
