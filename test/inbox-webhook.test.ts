import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/sandbox/sandbox.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/** The README's verification, as a receiver writes it: HMAC-SHA256 over `timestamp + "." + body`. */
function verified(secret: string, req: IncomingMessage, body: string): boolean {
  const ts = String(req.headers['herald-timestamp']);
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex')}`);
  const given = Buffer.from(String(req.headers['herald-signature']));
  return given.length === expected.length && timingSafeEqual(given, expected) && Math.abs(Date.now() / 1000 - Number(ts)) < 300;
}

/** A receiver that refuses the first `failFirst` tries of each event, then keeps each once by its Idempotency-Key. */
export async function webhookReceiver(secret: string, failFirst: number): Promise<{ url: string; tries: Map<string, number>; kept: Map<string, Record<string, unknown>>; badSignatures: number; close(): Promise<void> }> {
  const tries = new Map<string, number>();
  const kept = new Map<string, Record<string, unknown>>();
  const state = { badSignatures: 0 };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (!verified(secret, req, body)) {
        state.badSignatures += 1;
        res.writeHead(401).end();
        return;
      }
      const key = String(req.headers['idempotency-key']);
      const n = (tries.get(key) ?? 0) + 1;
      tries.set(key, n);
      if (n <= failFirst) {
        res.writeHead(503).end();
        return;
      }
      // Dedup by the key: a repeat is answered 200 and not kept again.
      if (!kept.has(key)) kept.set(key, JSON.parse(body) as Record<string, unknown>);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/herald`,
    tries,
    kept,
    get badSignatures() {
      return state.badSignatures;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

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
