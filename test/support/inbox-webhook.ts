import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The inbox guide's Idempotency-Key (docs/guides/inbox.md): the event_id, every character outside printable ASCII (and `%`) percent-encoded as UTF-8. */
export function expectedKey(eventId: string): string {
  let out = '';
  for (const ch of eventId) {
    const code = ch.codePointAt(0) ?? 0;
    out += code >= 0x21 && code <= 0x7e && ch !== '%' ? ch : [...Buffer.from(ch.length === 1 && code >= 0xd800 && code <= 0xdfff ? '\ufffd' : ch, 'utf8')].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
  }
  return out;
}

/**
 * The inbox guide's verification, as a receiver writes it: HMAC-SHA256 over `timestamp + "." + body`,
 * a recent timestamp, and an Idempotency-Key that is the signed body's event_id, encoded (a key
 * changed on the way does not verify).
 */
export function verified(secret: string, headers: Record<string, string | string[] | undefined>, body: string): boolean {
  const ts = String(headers['herald-timestamp']);
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex')}`);
  const given = Buffer.from(String(headers['herald-signature']));
  if (!(given.length === expected.length && timingSafeEqual(given, expected) && Math.abs(Date.now() / 1000 - Number(ts)) < 300)) return false;
  const eventId = (JSON.parse(body) as { event_id?: unknown }).event_id;
  return typeof eventId === 'string' && headers['idempotency-key'] === expectedKey(eventId);
}

/** A receiver that refuses the first `failFirst` tries of each event, then keeps each once by its signed event_id. */
export async function webhookReceiver(
  secret: string,
  failFirst: number,
): Promise<{ url: string; tries: Map<string, number>; kept: Map<string, Record<string, unknown>>; seen: { headers: Record<string, string>; body: string }[]; badSignatures: number; close(): Promise<void> }> {
  const tries = new Map<string, number>();
  const seen: { headers: Record<string, string>; body: string }[] = [];
  const kept = new Map<string, Record<string, unknown>>();
  const state = { badSignatures: 0 };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])), body });
      if (!verified(secret, req.headers, body)) {
        state.badSignatures += 1;
        res.writeHead(401).end();
        return;
      }
      // Dedup on the signed event_id (the verified Idempotency-Key is derived from it).
      const key = String((JSON.parse(body) as { event_id: string }).event_id);
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
    seen,
    get badSignatures() {
      return state.badSignatures;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

