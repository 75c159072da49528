import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { webhookReceiver } from './support/inbox-webhook.js';
import { waitFor } from './support/wait.js';

/**
 * No row can block a queue, the inbox's webhook pushes too: an event row whose stored attachments
 * are not JSON (inserted directly, as no platform event would write it) made its push throw before
 * it reached the webhook, on every attempt, re-driven at each lease's end for a day (its give-up
 * time was never reached). It is quarantined at once, with its reason, and the other events are pushed.
 */
describe('a poison row in the inbox', () => {
  let sandbox: DiscordSandbox;
  let h: TestHerald;
  let receiver: Awaited<ReturnType<typeof webhookReceiver>>;
  beforeAll(async () => {
    const secret = randomBytes(32).toString('base64url');
    receiver = await webhookReceiver(secret, 0);
    sandbox = await new DiscordSandbox().start();
    h = await startTestHerald({ useSandbox: sandbox, env: { HERALD_INBOX_WEBHOOK_URL: receiver.url, HERALD_INBOX_WEBHOOK_SECRET: secret } });
    await waitFor(() => sandbox.gatewaySessions === 1, 'Herald on the gateway');
    // A mention is heard only where a destination maps the channel.
    await h.mapDestination('ops', IDS.channels.ops);
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await sandbox?.close();
    await receiver?.close();
  });

  it('is quarantined with its reason, and the events after it are pushed', async () => {
    const db = h.herald.store.db;
    const now = new Date();
    const inserted = await sql<{ id: string }>`insert into inbox_events (event_id, kind, platform, channel_id, guild_id, message_id, author_id, author_bot, content, attachments, created_at, received_at)
      values ('discord:poison', 'mention', 'discord', ${IDS.channels.ops}, ${IDS.guild}, '1', ${IDS.user}, false, 'x', '{not json', ${now}, ${now}) returning id::text as id`.execute(db);
    const id = inserted.rows[0]?.id ?? '';
    await sql`insert into inbox_pushes (id, kind, status, next_attempt_at, created_at) values (${id}, 'inbox.webhook', 'pending', ${now}, ${now})`.execute(db);
    const res = await fetch(`${sandbox.url}/sandbox/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: IDS.user, channelId: IDS.channels.ops, content: `<@${sandbox.bot.id}> after the poison` }) });
    const after = ((await res.json()) as { id: string }).id;
    await waitFor(() => receiver.kept.has(`discord:${after}`), 'the next event pushed', 20_000);
    const push = await waitFor(async () => {
      const r = await sql<{ status: string; last_error: string | null }>`select status, last_error from inbox_pushes where id = ${id}`.execute(db);
      return r.rows[0]?.status === 'failed' ? r.rows[0] : undefined;
    }, 'the poison push quarantined', 20_000);
    expect(push.last_error).toBe('quarantined: handling this job threw on its own content (SyntaxError)');
    expect(await h.herald.registry.getSingleMetricAsString('herald_outbox_jobs_quarantined_total')).toMatch(/kind="inbox.webhook"} 1/);
  }, 60_000);
});
