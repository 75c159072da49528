import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { client } from './support/client.js';
import { onPostgres } from './support/db.js';
import { IDS } from './support/herald.js';
import type { HeraldProcess } from './support/process.js';
import { crashRig } from './support/rigs.js';
import { webhookReceiver } from './support/inbox-webhook.js';
import { waitFor } from './support/wait.js';

/**
 * No gap (the "done when"): two `herald serve` replicas on one PostgreSQL, one gateway
 * session between them. The holder is SIGKILLed while a person writes 50 messages in a listened
 * channel; the other takes the session over and reads back what it missed from the channel's
 * history. All 50 reach the inbox once, and a webhook receiver that fails the first tries keeps
 * each once by its Idempotency-Key.
 */
describe.skipIf(!onPostgres)('the inbox across a gateway failover', () => {
  const rig = crashRig();
  const { sandbox, procs, bridgeToken, adminToken } = rig;

  const write = async (content: string): Promise<string> => {
    const res = await fetch(`${sandbox.url}/sandbox/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: IDS.user, channelId: IDS.channels.alerts, content }) });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  };
  const inbox = async (p: HeraldProcess): Promise<{ message_id: string; event_id: string; content: string; kind: string }[]> => {
    const api = client(p.url ?? '', bridgeToken);
    const items: { message_id: string; event_id: string; content: string; kind: string }[] = [];
    let after = '0';
    for (;;) {
      const page = (await api.get(`/mcp/inbox?after=${after}&limit=100`)).json as { items: typeof items; next_cursor: string | null };
      items.push(...page.items);
      if (page.next_cursor === null) return items;
      after = page.next_cursor;
    }
  };

  it('SIGKILL of the gateway holder while 50 messages are written: all 50 in the inbox once, each pushed once for the receiver', async () => {
    await rig.database();
    const secret = randomBytes(32).toString('base64url');
    const receiver = await webhookReceiver(secret, 2);
    try {
      const env = rig.env({
        HERALD_DISCORD_MESSAGE_CONTENT: 'on',
        HERALD_INBOX_WEBHOOK_URL: receiver.url,
        HERALD_INBOX_WEBHOOK_SECRET: secret,
        HERALD_RETRY_BASE_MS: '100',
      });
      const first = await procs.start(['serve'], env);
      await waitFor(() => sandbox.gatewaySessions === 1, 'the first replica on the gateway', 30_000);
      const second = await procs.start(['serve'], env);
      const admin = client(first.url ?? '', adminToken);
      expect((await admin.put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts })).status).toBe(200);
      expect((await admin.put(`/admin/destinations/${IDS.guild}/alerts/listen`, { listen: true })).status).toBe(200);

      const written: { id: string; content: string }[] = [];
      for (let i = 0; i < 10; i++) {
        const content = `failover message ${i}`;
        written.push({ id: await write(content), content });
      }
      await waitFor(async () => (await inbox(second)).length >= 10, 'the first ten heard live', 20_000);
      first.kill('SIGKILL');
      // Written while the holder is dying and nobody holds the gateway.
      for (let i = 10; i < 50; i++) {
        const content = `failover message ${i}`;
        written.push({ id: await write(content), content });
      }
      await first.exited;
      await waitFor(() => sandbox.gatewaySessions === 1, 'the second replica on the gateway', 30_000);
      await waitFor(async () => (await inbox(second)).length >= 50, 'all 50 in the inbox', 60_000);

      const events = await inbox(second);
      expect(events).toHaveLength(50);
      expect(new Set(events.map((e) => e.event_id)).size).toBe(50);
      expect(events.map((e) => ({ id: e.message_id, content: e.content })).sort((a, b) => (a.id < b.id ? -1 : 1))).toEqual([...written].sort((a, b) => (a.id < b.id ? -1 : 1)));
      expect(events.every((e) => e.kind === 'message')).toBe(true);

      await waitFor(() => receiver.kept.size === 50, 'each event kept by the receiver', 60_000);
      expect([...receiver.kept.keys()].sort()).toEqual(events.map((e) => e.event_id).sort());
      for (const key of receiver.kept.keys()) expect(receiver.tries.get(key) ?? 0).toBeGreaterThanOrEqual(3);
      expect(receiver.badSignatures).toBe(0);
    } finally {
      await receiver.close();
    }
  }, 180_000);
});
