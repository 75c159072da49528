import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/sandbox/sandbox.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { webhookReceiver } from './support/inbox-webhook.js';
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
});
