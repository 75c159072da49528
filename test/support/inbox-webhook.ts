import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

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

