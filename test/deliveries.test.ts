import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { deliveryNonce } from '../src/modules/deliveries/delivery.js';
import { IDS, newRequestId, post, REQ_A, REQ_B, startTestHerald, type TestHerald } from './support/herald.js';
import { client } from './support/client.js';
import { waitFor } from './support/wait.js';

// docs/protocol.md §2, §4, §5 and §6 for posts.
describe('posts, exactly once', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
    await h.mapDestination('alerts', IDS.channels.alerts);
  });
  afterAll(() => h.close());
  beforeEach(() => h.sandbox.clearFaults());

  it('answers capabilities byte for byte', async () => {
    const res = await h.bridge.get('/mcp/capabilities');
    expect(res.status).toBe(200);
    expect(res.text).toBe(
      '{"dm":true,"targeted_post":true,"cards":true,"edit":true,"destinations":[' +
        '{"destination":"alerts","description":"Time-sensitive findings and warnings"},' +
        '{"destination":"deals","description":"Notable deals or opportunities"},' +
        '{"destination":"digest","description":"Periodic summaries"},' +
        '{"destination":"ops","description":"Operational status and infrastructure notices"}]}',
    );
  });

  it('accepts a post with 202 pending, then delivers it once to the mapped channel', async () => {
    const res = await h.bridge.post('/mcp/deliveries', post(REQ_A, 'hello <@123> @everyone'));
    expect(res.status).toBe(202);
    const createdAt = (res.json as { state: { created_at: string } }).state.created_at;
    expect(createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(res.text).toBe(
      `{"state":{"state":"pending","kind":"post","target":{"guild_id":"${IDS.guild}","destination":"alerts"},"body":{"content":"hello <@123> @everyone"},"created_at":"${createdAt}"},"existing":false}`,
    );
    await h.waitForState(REQ_A, 'delivered');
    const messages = h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.content === 'hello <@123> @everyone');
    expect(messages).toHaveLength(1);
    const [m] = messages;
    expect(m?.nonce).toBe(deliveryNonce(REQ_A));
    expect(String(m?.nonce).length).toBeLessThanOrEqual(25);
    expect(m?.allowed_mentions).toEqual({ parse: [] });
    const get = await h.bridge.get(`/mcp/deliveries/${REQ_A}`);
    expect(get.text).toBe(
      `{"state":"delivered","kind":"post","target":{"guild_id":"${IDS.guild}","destination":"alerts"},"body":{"content":"hello <@123> @everyone"},"created_at":"${createdAt}",` +
        `"message_ref":"${REQ_A}","url":"https://discord.com/channels/${IDS.guild}/${IDS.channels.alerts}/${m?.id}"}`,
    );
    // A retry after delivery answers the stored state, existing, and sends nothing.
    const again = await h.bridge.post('/mcp/deliveries', post(REQ_A, 'hello <@123> @everyone'));
    expect(again.status).toBe(202);
    expect(again.text).toBe(`{"state":${get.text},"existing":true}`);
    expect(h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.content === 'hello <@123> @everyone')).toHaveLength(1);
  });

  it('sends a card as one embed and links as one row of link buttons', async () => {
    const id = newRequestId();
    const body = {
      content: 'with card',
      card: { title: 'T', description: 'D', url: 'https://example.com/t', color: 255, footer: 'F', fields: [{ name: 'n', value: 'v', inline: true }] },
      links: [
        { label: 'One', url: 'https://example.com/1' },
        { label: 'Two', url: 'https://example.com/2' },
      ],
    };
    await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts' }, body });
    await h.waitForState(id, 'delivered');
    const m = h.sandbox.channelMessages(IDS.channels.alerts).find((x) => x.content === 'with card');
    expect(m?.embeds).toEqual([{ title: 'T', description: 'D', url: 'https://example.com/t', color: 255, footer: { text: 'F' }, fields: [{ name: 'n', value: 'v', inline: true }] }]);
    expect(m?.components).toEqual([
      {
        type: 1,
        components: [
          { type: 2, style: 5, label: 'One', url: 'https://example.com/1' },
          { type: 2, style: 5, label: 'Two', url: 'https://example.com/2' },
        ],
      },
    ]);
  });

  it('turns 20 concurrent identical POSTs into one stored delivery and one Discord message', async () => {
    const id = newRequestId();
    const results = await Promise.all(Array.from({ length: 20 }, () => h.bridge.post('/mcp/deliveries', post(id, `concurrent ${id}`))));
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(202));
    expect(results.filter((r) => (r.json as { existing: boolean }).existing === false)).toHaveLength(1);
    const createdAts = new Set(results.map((r) => (r.json as { state: { created_at: string } }).state.created_at));
    expect(createdAts.size).toBe(1);
    await h.waitForState(id, 'delivered');
    expect(h.sandbox.allMessages().filter((m) => m.content === `concurrent ${id}`)).toHaveLength(1);
  });

  it('answers a retry while pending with the pending state and no new attempt', async () => {
    const id = newRequestId();
    // Hold Discord's answer so the delivery stays pending.
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'delay', ms: 1_500 });
    const before = h.sandbox.requests.length;
    const creates = () => h.sandbox.requests.slice(before).filter((r) => r.method === 'POST' && r.path === `/channels/${IDS.channels.alerts}/messages`);
    await h.bridge.post('/mcp/deliveries', post(id, `slow ${id}`));
    // The retry comes while the first attempt's create is held at Discord.
    await waitFor(() => creates().length === 1, 'the first create to reach Discord');
    const again = await h.bridge.post('/mcp/deliveries', post(id, `slow ${id}`));
    expect(again.status).toBe(202);
    expect((again.json as { existing: boolean; state: { state: string } }).existing).toBe(true);
    expect((again.json as { state: { state: string } }).state.state).toBe('pending');
    await h.waitForState(id, 'delivered');
    expect(h.sandbox.allMessages().filter((m) => m.content === `slow ${id}`)).toHaveLength(1);
    // One create reached Discord: a second attempt would be hidden from the message count by the
    // nonce (Discord answers it with the first message), so the request log is what shows it. A
    // later post to the same channel is sent after any create already queued there (discord.js sends
    // one channel's creates in order): once it is delivered, a second attempt would have shown.
    const marker = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(marker, `marker ${marker}`));
    await h.waitForState(marker, 'delivered');
    expect(creates()).toHaveLength(2);
  });

  it('refuses a reused request_id with a different payload with 422 and changes nothing', async () => {
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(id, 'original'));
    const before = await h.bridge.get(`/mcp/deliveries/${id}`);
    for (const other of [post(id, 'changed'), post(id, 'original', 'deals'), { ...post(id, 'original'), kind: 'dm', target: { user_id: IDS.user } }]) {
      const res = await h.bridge.post('/mcp/deliveries', other);
      expect(res.status).toBe(422);
      expect(res.text).toBe('{"error":"request_id was already used for a different request"}');
    }
    const after = await h.bridge.get(`/mcp/deliveries/${id}`);
    expect((after.json as { created_at: string }).created_at).toBe((before.json as { created_at: string }).created_at);
    expect((after.json as { body: unknown }).body).toEqual({ content: 'original' });
  });

  it('treats a retry with the same payload in another key order or with unknown keys as the same request', async () => {
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(id, 'same'));
    const res = await h.bridge.post('/mcp/deliveries', { body: { content: 'same', junk: 1 }, target: { destination: 'alerts', guild_id: IDS.guild }, kind: 'post', request_id: id });
    expect(res.status).toBe(202);
    expect((res.json as { existing: boolean }).existing).toBe(true);
  });

  it('fails an unmapped destination with UPSTREAM_UNAVAILABLE and no Discord call, then delivers on retry once mapped, keeping created_at', async () => {
    const id = newRequestId();
    const sent = h.sandbox.requests.length;
    const first = await h.bridge.post('/mcp/deliveries', post(id, `digest ${id}`, 'digest'));
    const created = (first.json as { state: { created_at: string } }).state.created_at;
    const failed = await h.waitForState(id, 'failed');
    expect(failed['code']).toBe('UPSTREAM_UNAVAILABLE');
    expect(Object.keys(failed)).toEqual(['state', 'kind', 'target', 'body', 'created_at', 'code']);
    // No Discord call for it (other tests' deliveries to #alerts may still be going out meanwhile).
    expect(h.sandbox.requests.slice(sent).filter((r) => r.method === 'POST' && !r.path.startsWith(`/channels/${IDS.channels.alerts}/`))).toEqual([]);
    expect(h.sandbox.allMessages().filter((m) => m.content === `digest ${id}`)).toEqual([]);
    // Counted without the destination's name: callers choose names, labels stay low-cardinality.
    const metrics = await (await fetch(`${h.herald.metricsUrl ?? ''}/metrics`)).text();
    expect(metrics).toMatch(/^herald_post_unmapped_total [1-9]/m);

    await h.mapDestination('digest', IDS.channels.digest);
    const retry = await h.bridge.post('/mcp/deliveries', post(id, `digest ${id}`, 'digest'));
    expect(retry.status).toBe(202);
    expect(retry.json).toMatchObject({ existing: true, state: { state: 'pending', created_at: created } });
    const delivered = await h.waitForState(id, 'delivered');
    expect(delivered['created_at']).toBe(created);
    expect(h.sandbox.channelMessages(IDS.channels.digest).filter((m) => m.content === `digest ${id}`)).toHaveLength(1);
  });

  it('answers GET for an unknown request_id and for a malformed one', async () => {
    const unknown = await h.bridge.get(`/mcp/deliveries/${REQ_B.replace(/b/g, 'e')}`);
    expect(unknown.status).toBe(404);
    expect(unknown.text).toBe('{"error":"unknown request_id"}');
    for (const bad of ['xyz', 'A'.repeat(64), 'a'.repeat(65), 'a'.repeat(63)]) {
      const res = await h.bridge.get(`/mcp/deliveries/${bad}`);
      expect(res.status, bad).toBe(404);
      expect(res.text).toBe('{"error":"not found"}');
    }
  });

  it('never logs message content or tokens', async () => {
    // The in-process app logs through pino at LOG_LEVEL; this checks the dispatcher's and HTTP's
    // log calls by running a delivery with a capturing logger.
    const lines: string[] = [];
    const { createLogger } = await import('../src/infra/log.js');
    const { Writable } = await import('node:stream');
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(chunk.toString());
        cb();
      },
    });
    const { startHerald } = await import('../src/app.js');
    const { loadConfig } = await import('../src/config.js');
    const { testDatabase } = await import('./support/db.js');
    const db = await testDatabase();
    const { DATABASE_URL: _shared, ...env } = h.env;
    const config = loadConfig({ ...env, LOG_LEVEL: 'trace', HERALD_DATA_DIR: db.dataDir, ...(db.databaseUrl ? { DATABASE_URL: db.databaseUrl } : {}) });
    const other = await startHerald({ config, log: createLogger('trace', sink), roles: { http: true, dispatcher: true } });
    try {
      const id = newRequestId();
      const secret = `secret-content-${id}`;
      await client(other.url ?? '', h.adminToken).put(`/admin/destinations/${IDS.guild}/ops`, { channel_id: IDS.channels.ops });
      const res = await fetch(`${other.url}/mcp/deliveries`, { method: 'POST', headers: { authorization: `Bearer ${h.bridgeToken}` }, body: JSON.stringify(post(id, secret, 'ops')) });
      expect(res.status).toBe(202);
      await waitFor(() => lines.some((l) => l.includes('delivery finished') && l.includes(id)), 'the delivery to finish');
      await fetch(`${other.url}/mcp/capabilities`, { headers: { authorization: 'Bearer wrong-token-value' } });
      const all = lines.join('');
      expect(all).toContain(id);
      expect(all).not.toContain(secret);
      expect(all).not.toContain(h.bridgeToken);
      expect(all).not.toContain('wrong-token-value');
      expect(all).not.toContain(h.sandbox.botToken);
    } finally {
      await other.close();
      await db.drop();
    }
  });
});

describe('a bridge with DMs and edits disabled (HERALD_DISABLED_KINDS)', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ env: { HERALD_DISABLED_KINDS: 'dm,edit' } });
  });
  afterAll(() => h.close());

  it('reports them false in capabilities', async () => {
    expect((await h.bridge.get('/mcp/capabilities')).json).toMatchObject({ dm: false, targeted_post: true, cards: true, edit: false });
  });

  it('answers dm and edit with failed CAPABILITY_UNAVAILABLE at once, and again on retry, with no Discord call', async () => {
    const before = h.sandbox.requests.length;
    const dm = { request_id: newRequestId(), kind: 'dm', target: { user_id: IDS.user }, body: { content: 'hi' } };
    const edit = { request_id: newRequestId(), kind: 'edit', target: { message_ref: REQ_A, seq: 1 }, body: { content: 'v2' } };
    for (const req of [dm, edit]) {
      for (const existing of [false, true]) {
        const res = await h.bridge.post('/mcp/deliveries', req);
        expect(res.status).toBe(202);
        expect(res.json).toMatchObject({ existing, state: { state: 'failed', code: 'CAPABILITY_UNAVAILABLE' } });
      }
    }
    // A post accepted after them and delivered means the dispatcher has claimed since: they were not due.
    await h.mapDestination();
    const sentinel = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(sentinel, 'sentinel'));
    await h.waitForState(sentinel, 'delivered');
    expect(h.sandbox.requests.slice(before).filter((r) => r.method === 'PATCH' || r.path === '/users/@me/channels')).toEqual([]);
  });
});
