import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handoffsModule } from '../src/modules/handoffs/index.js';
import { HANDOFF_SCHEMA, handoffContent } from '../src/modules/handoffs/envelope.js';
import { DiscordSandbox, SANDBOX_MEDIA_CHANNEL } from '../src/platforms/discord/sandbox/sandbox.js';
import { onPostgres, testDatabase, type TestDatabase } from './support/db.js';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/**
 * Two replicas of one Herald on one PostgreSQL database: `runner` serves HTTP and runs the jobs,
 * `web` only serves HTTP. Polling is set to a minute, so what one replica learns from the other
 * within seconds it can only have learned through NOTIFY.
 */

const POLL_MS = 60_000;
/** A peer bot trusted to hand tasks to this one. */
const PEER = '111111111111111112';

interface ScrapeEvent {
  id: string;
  state: string;
  messagesSeen: number;
}

/** The archive's live event stream (server-sent events) of one replica, collected as it arrives. */
async function openStream(h: TestHerald): Promise<{ scrapes: ScrapeEvent[]; close(): void }> {
  const abort = new AbortController();
  const res = await fetch(`${h.url}/admin/archive/events`, { headers: { authorization: `Bearer ${h.adminToken}` }, signal: abort.signal });
  expect(res.status).toBe(200);
  const scrapes: ScrapeEvent[] = [];
  const reader = res.body?.getReader();
  if (reader === undefined) throw new Error('no stream body');
  const decoder = new TextDecoder();
  let buffered = '';
  void (async () => {
    for (;;) {
      const chunk = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (chunk.done) return;
      buffered += decoder.decode(chunk.value, { stream: true });
      let end;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event === 'scrape' && data !== undefined) scrapes.push(JSON.parse(data) as ScrapeEvent);
      }
    }
  })();
  return { scrapes, close: () => abort.abort() };
}

describe.skipIf(!onPostgres)('events cross replicas (PostgreSQL NOTIFY)', () => {
  let sandbox: DiscordSandbox;
  let db: TestDatabase;
  let runner: TestHerald;
  let web: TestHerald;

  beforeAll(async () => {
    sandbox = await new DiscordSandbox({ mediaMessages: 500 }).start();
    db = await testDatabase();
    const env = { HERALD_POLL_MS: String(POLL_MS), HERALD_TRUSTED_BOT_IDS: PEER, HERALD_DISCORD_CHAT_GUILD: IDS.guild };
    runner = await startTestHerald({ useSandbox: sandbox, useDb: db, env });
    web = await startTestHerald({ useSandbox: sandbox, useDb: db, env, roles: { http: true, dispatcher: false } });
    await runner.mapDestination();
  }, 120_000);
  afterAll(async () => {
    await web?.close();
    await runner?.close();
    await sandbox?.close();
    await db?.drop();
  });

  it('a scrape run by one replica is seen progressing on the live stream of another', async () => {
    const stream = await openStream(web);
    try {
      const res = await runner.admin.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' });
      expect(res.status).toBe(201);
      const id = (res.json as ScrapeEvent).id;
      const mine = (): ScrapeEvent[] => stream.scrapes.filter((s) => s.id === id);
      await waitFor(() => mine().some((s) => s.state === 'completed'), 'the completed scrape on the other replica\'s stream', 60_000);
      const done = mine().findIndex((s) => s.state === 'completed');
      // Seen while it ran, with pages read, before it completed.
      expect(mine().slice(0, done).some((s) => s.state === 'running' && s.messagesSeen > 0)).toBe(true);
      const final = mine()[done];
      expect(final?.messagesSeen).toBe(500);
    } finally {
      stream.close();
    }
  }, 90_000);

  it('a wait for a handoff on one replica ends as soon as another takes one in, long before its poll', async () => {
    const self = sandbox.bot.id;
    const waiting = (async () => {
      const started = Date.now();
      const res = await web.bridge.get('/mcp/handoffs/inbox/next?timeout_ms=20000');
      return { res, ms: Date.now() - started };
    })();
    // The wait is under way (it looked at the empty inbox and sleeps until news or its poll) before the handoff arrives.
    const webHandoffs = web.herald.use(handoffsModule).handoffs;
    await waitFor(() => webHandoffs['arrivals'].listenerCount('arrived') > 0, 'the wait to be under way');
    const eventId = randomUUID();
    let arrivedAt = 0;
    await waitFor(async () => {
      // Taken in by the runner only: no message reaches the platform, so the web replica never sees one itself.
      const outcome = await runner.herald.use(handoffsModule).handoffs.receive({
        channelId: IDS.channels.ops,
        messageId: String(500000000000000000n + BigInt(Date.now() % 1_000_000)),
        authorId: PEER,
        authorIsBot: true,
        guildId: IDS.guild,
        createdAt: new Date(),
        content: handoffContent({
          schema: HANDOFF_SCHEMA,
          source_bot_id: PEER,
          target_bot_id: self,
          event_id: eventId,
          origin_channel_id: IDS.channels.ops,
          origin_thread_id: null,
          origin_message_id: null,
          expires_at: Math.floor(Date.now() / 1000) + 300,
          hop_count: 0,
          payload: { text: 'summarise the alerts' },
        }),
      });
      arrivedAt = Date.now();
      return outcome === 'accepted';
    }, 'the handoff to be taken in');
    const { res, ms } = await waiting;
    expect(res.status).toBe(200);
    expect((res.json as { handoff: { event_id: string } | null }).handoff?.event_id).toBe(eventId);
    // The wait's own poll is POLL_MS / 4 (15 s): only the NOTIFY explains an answer within a second.
    expect(Date.now() - arrivedAt).toBeLessThan(1_000);
    expect(ms).toBeLessThan(POLL_MS / 4);
  }, 30_000);

  it('work queued on a replica without a job runner is sent promptly by the other replica\'s', async () => {
    const requestId = newRequestId();
    const started = Date.now();
    expect((await web.bridge.post('/mcp/deliveries', post(requestId, 'from the web replica'))).status).toBe(202);
    await runner.waitForState(requestId, 'delivered', 10_000);
    // The runner's poll is a minute: only the doorbell's NOTIFY explains a send within seconds.
    expect(Date.now() - started).toBeLessThan(5_000);
  }, 30_000);

  it('a chat line sent on a replica without a job runner is sent promptly by the other replica\'s', async () => {
    const started = Date.now();
    const send = await web.bridge.post('/mcp/chat/messages', { channel: '#alerts', text: 'from the web replica', sender: 'ada' });
    expect(send.status).toBe(202);
    const id = (send.json as { id: string }).id;
    await waitFor(async () => ((await web.bridge.get(`/mcp/chat/messages/${id}`)).json as { state: string }).state === 'delivered', 'the chat line to be delivered', 10_000);
    expect(Date.now() - started).toBeLessThan(5_000);
  }, 30_000);

  it('a scrape started on a replica without a job runner is run promptly by the other replica\'s', async () => {
    const started = Date.now();
    const res = await web.admin.post('/admin/archive/scrapes', { channelId: IDS.channels.ops, mode: 'links' });
    expect(res.status).toBe(201);
    const id = (res.json as ScrapeEvent).id;
    await waitFor(async () => ((await web.admin.get(`/admin/archive/scrapes/${id}`)).json as ScrapeEvent).state === 'completed', 'the scrape to complete', 10_000);
    expect(Date.now() - started).toBeLessThan(5_000);
  }, 30_000);
});
