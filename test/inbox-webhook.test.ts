import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { idempotencyKey } from '../src/modules/inbox/inbox.webhook.js';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { expectedKey, verified, webhookReceiver } from './support/inbox-webhook.js';
import { waitFor } from './support/wait.js';

describe('webhook pushes of the inbox: signed, retried on 5xx, each event once for the receiver', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  const start = async (env: Record<string, string>): Promise<{ h: TestHerald; sandbox: DiscordSandbox }> => {
    const sandbox = await new DiscordSandbox().start();
    closers.push(() => sandbox.close());
    const h = await startTestHerald({ useSandbox: sandbox, env });
    closers.push(() => h.close());
    await waitFor(() => sandbox.gatewaySessions === 1, 'Herald on the gateway');
    // A mention is heard only where a destination maps the channel.
    await h.mapDestination('ops', IDS.channels.ops);
    return { h, sandbox };
  };
  const mention = async (sandbox: DiscordSandbox, text: string): Promise<string> => {
    const res = await fetch(`${sandbox.url}/sandbox/api/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: IDS.user, channelId: IDS.channels.ops, content: `<@${sandbox.bot.id}> ${text}` }),
    });
    return ((await res.json()) as { id: string }).id;
  };

  it('a receiver failing the first two tries of each event keeps each exactly once, with a valid signature and the event as the inbox has it', async () => {
    const secret = randomBytes(32).toString('base64url');
    const receiver = await webhookReceiver(secret, 2);
    closers.push(() => receiver.close());
    const { h, sandbox } = await start({ HERALD_INBOX_WEBHOOK_URL: receiver.url, HERALD_INBOX_WEBHOOK_SECRET: secret });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await mention(sandbox, `push ${i}`));
    await waitFor(() => receiver.kept.size === 5, 'five events kept by the receiver', 30_000);
    expect([...receiver.kept.keys()].sort()).toEqual(ids.map((id) => `discord:${id}`).sort());
    for (const key of receiver.kept.keys()) expect(receiver.tries.get(key)).toBe(3);
    expect(receiver.badSignatures).toBe(0);
    const page = (await h.bridge.get('/mcp/inbox')).json as { items: Record<string, unknown>[] };
    for (const item of page.items) expect(receiver.kept.get(String(item['event_id']))).toEqual(item);
  }, 60_000);

  it('a push that keeps failing is given up after the bounded time; the event stays in the inbox', async () => {
    const secret = randomBytes(32).toString('base64url');
    const receiver = await webhookReceiver(secret, 1_000_000);
    closers.push(() => receiver.close());
    const { h, sandbox } = await start({ HERALD_INBOX_WEBHOOK_URL: receiver.url, HERALD_INBOX_WEBHOOK_SECRET: secret, HERALD_INBOX_WEBHOOK_GIVE_UP_SECONDS: '2' });
    const id = await mention(sandbox, 'never accepted');
    await waitFor(() => (receiver.tries.get(`discord:${id}`) ?? 0) >= 2, 'retries of the push', 20_000);
    const metric = async () => (await h.herald.registry.getSingleMetricAsString('herald_inbox_webhook_pushes_total')).match(/outcome="given_up"} ([0-9]+)/)?.[1];
    await waitFor(async () => (await metric()) === '1', 'the push given up', 20_000);
    expect(((await h.bridge.get('/mcp/inbox')).json as { items: { message_id: string }[] }).items.map((i) => i.message_id)).toContain(id);
  }, 60_000);

  it("a reaction on Herald's message reaches the receiver: its emoji is percent-encoded in the Idempotency-Key (Node refused the raw one, and the push was retried for a day)", async () => {
    const secret = randomBytes(32).toString('base64url');
    const receiver = await webhookReceiver(secret, 0);
    closers.push(() => receiver.close());
    const { h, sandbox } = await start({ HERALD_INBOX_WEBHOOK_URL: receiver.url, HERALD_INBOX_WEBHOOK_SECRET: secret });
    const id = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(id, 'deploy 7 done', 'ops'))).status).toBe(202);
    await h.waitForState(id, 'delivered');
    const sent = sandbox.channelMessages(IDS.channels.ops).find((m) => m.content === 'deploy 7 done');
    const res = await fetch(`${sandbox.url}/sandbox/api/reactions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: IDS.user, channelId: IDS.channels.ops, messageId: sent?.id, emoji: '👍' }),
    });
    expect(res.status).toBe(204);
    const eventId = `discord:${sent?.id}:reaction:${IDS.user}:👍`;
    await waitFor(() => receiver.kept.has(eventId), 'the reaction kept by the receiver', 20_000);
    expect(receiver.kept.get(eventId)).toMatchObject({ kind: 'reaction', reaction: '👍', message_id: sent?.id });
    const request = receiver.seen.find((r) => r.body.includes('"kind":"reaction"'));
    expect(request?.headers['idempotency-key']).toBe(`discord:${sent?.id}:reaction:${IDS.user}:%F0%9F%91%8D`);
    expect(receiver.tries.get(eventId)).toBe(1);
    expect(receiver.badSignatures).toBe(0);
  }, 60_000);

  it('the Idempotency-Key is bound to the signed body: a key or a body changed on the way fails verification, the original verifies', async () => {
    const secret = randomBytes(32).toString('base64url');
    const receiver = await webhookReceiver(secret, 0);
    closers.push(() => receiver.close());
    const { sandbox } = await start({ HERALD_INBOX_WEBHOOK_URL: receiver.url, HERALD_INBOX_WEBHOOK_SECRET: secret });
    const id = await mention(sandbox, 'sign me');
    await waitFor(() => receiver.kept.has(`discord:${id}`), 'the mention pushed', 20_000);
    const original = receiver.seen.find((r) => r.body.includes(id));
    expect(original).toBeDefined();
    const { headers, body } = original as { headers: Record<string, string>; body: string };
    expect(verified(secret, headers, body)).toBe(true);
    expect(verified(secret, { ...headers, 'idempotency-key': 'discord:1' }, body)).toBe(false);
    expect(verified(secret, headers, body.replace('sign me', 'sign mE'))).toBe(false);
    // Replayed to the receiver with another key: refused, and kept once all the same.
    const replay = await fetch(receiver.url, { method: 'POST', headers: { ...headers, 'idempotency-key': `discord:${id}-again` }, body });
    expect(replay.status).toBe(401);
    expect(receiver.kept.size).toBe(1);
  }, 60_000);

  it('Idempotency-Key is printable ASCII by construction, whatever the event_id holds; an ASCII event_id is unchanged', () => {
    for (const eventId of ['discord:1:reaction:2:👍', 'discord:1:reaction:2:a\ud800b', 'discord:1:reaction:2:\u0000\r\n', 'slack:C1:x y%z', 'discord:1:reaction:2:🏳️‍🌈']) {
      const key = idempotencyKey(eventId);
      expect(key).toMatch(/^[\x21-\x7e]+$/);
      expect(() => new Headers({ 'Idempotency-Key': key })).not.toThrow();
      expect(key).toBe(expectedKey(eventId));
    }
    expect(idempotencyKey('discord:456789012345678901')).toBe('discord:456789012345678901');
    expect(idempotencyKey('discord:1:reaction:2:party:123456789012345678')).toBe('discord:1:reaction:2:party:123456789012345678');
  });
});
