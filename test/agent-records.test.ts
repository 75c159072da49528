import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { newRequestId, startTestHerald, TestClock, type TestHerald } from './support/herald.js';
import { onPostgres, testDatabase, type TestDatabase } from './support/db.js';

const DAY_MS = 24 * 60 * 60_000;

/**
 * `/mcp/records/` (openapi/records.yaml): what `herald mcp` remembers of each caller's sends, in
 * Herald's store so its replicas on different hosts share it (issue 39). Black box, over HTTP: bad
 * input is a 4xx naming the field; one caller's records are invisible to another; every change is
 * atomic: many calls at once (on two Herald replicas of one PostgreSQL database, when the tests run
 * on it) never hand out one edit seq twice, and exactly one of many claims is the first.
 */
describe('agent records in the store (/mcp/records/)', { timeout: 120_000 }, () => {
  let sandbox: DiscordSandbox;
  let db: TestDatabase;
  let clock: TestClock;
  /** One Herald; on PostgreSQL, two replicas of one database (calls alternate between them). */
  const heralds: TestHerald[] = [];

  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
    db = await testDatabase();
    clock = new TestClock();
    heralds.push(await startTestHerald({ useSandbox: sandbox, useDb: db, clock }));
    if (onPostgres) heralds.push(await startTestHerald({ useSandbox: sandbox, useDb: db, clock, roles: { http: true, dispatcher: false } }));
  });
  afterAll(async () => {
    for (const h of heralds.reverse()) await h.close();
    await sandbox?.close();
    await db?.drop();
  });

  let turn = 0;
  /** One call with the bridge token, as `client` (x-herald-policy-client) or the connector; on the replicas in turn. */
  const call = async (method: string, path: string, body?: unknown, client?: string): Promise<{ status: number; json: Record<string, unknown> | undefined }> => {
    const h = heralds[turn++ % heralds.length] as TestHerald;
    const res = await fetch(`${h.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${h.bridgeToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(client === undefined ? {} : { 'x-herald-policy-client': client }) },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, json: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>) };
  };
  const message = (id: string): string => `/mcp/records/messages/${id}`;

  it('refuses bad input with a 4xx naming the field', async () => {
    const id = newRequestId();
    expect(await call('GET', message('NOT-HEX'))).toEqual({ status: 400, json: { error: expect.stringContaining('request_id') as string } });
    expect(await call('PUT', '/mcp/records/claims/abc')).toEqual({ status: 400, json: { error: expect.stringContaining('request_id') as string } });
    expect(await call('PUT', message(id), { kind: 'edit' })).toEqual({ status: 400, json: { error: expect.stringContaining('kind') as string } });
    expect(await call('PUT', message(id), {})).toEqual({ status: 400, json: { error: expect.stringContaining('kind') as string } });
    expect(await call('PUT', message(id), 'not json')).toMatchObject({ status: 400 });
    expect(await call('PUT', message(id), { kind: 'post' })).toMatchObject({ status: 200, json: { request_id: id, kind: 'post', seq: 0 } });
    expect(await call('POST', `${message(id)}/seq`, { edit_id: 'x' })).toEqual({ status: 400, json: { error: expect.stringContaining('edit_id') as string } });
    expect(await call('POST', `${message(newRequestId())}/seq`, {})).toEqual({ status: 404, json: { error: 'no such message' } });
    expect(await call('POST', '/mcp/records/import', { messages: { [id]: { kind: 'post', seq: -1, sent_at: new Date().toISOString() } } })).toEqual({ status: 400, json: { error: expect.stringContaining('seq') as string } });
    expect(await call('POST', '/mcp/records/import', { messages: { [id]: { kind: 'post', seq: 1, sent_at: 'yesterday' } } })).toEqual({ status: 400, json: { error: expect.stringContaining('sent_at') as string } });
    expect(await call('POST', '/mcp/records/import', { messages: { short: { kind: 'post', seq: 1, sent_at: new Date().toISOString() } } })).toEqual({ status: 400, json: { error: expect.stringContaining('messages') as string } });
    expect(await call('POST', '/mcp/records/import', { sent: {} })).toEqual({ status: 400, json: { error: expect.stringContaining('messages') as string } });
  });

  it("keeps each caller's records its own: another caller (or the connector) sees none of them", async () => {
    const id = newRequestId();
    expect(await call('PUT', message(id), { kind: 'dm' }, 'alice')).toMatchObject({ status: 200, json: { kind: 'dm', seq: 0 } });
    expect(await call('PUT', `/mcp/records/claims/${id}`, undefined, 'alice')).toEqual({ status: 200, json: { claimed_before: false } });
    expect(await call('GET', message(id), undefined, 'alice')).toMatchObject({ status: 200, json: { request_id: id, kind: 'dm' } });
    expect(await call('GET', `/mcp/records/claims/${id}`, undefined, 'alice')).toEqual({ status: 200, json: { owned: true } });
    for (const other of ['bob', undefined]) {
      expect(await call('GET', message(id), undefined, other)).toEqual({ status: 404, json: { error: 'no such message' } });
      expect(await call('GET', `/mcp/records/claims/${id}`, undefined, other)).toEqual({ status: 200, json: { owned: false } });
      expect(await call('POST', `${message(id)}/seq`, {}, other)).toEqual({ status: 404, json: { error: 'no such message' } });
      // Another's claim is no claim of this caller's: its first claim is the first.
      expect(await call('PUT', `/mcp/records/claims/${id}`, undefined, other)).toEqual({ status: 200, json: { claimed_before: false } });
    }
    // A release is the caller's own too: bob's leaves alice's claim.
    expect((await call('DELETE', `/mcp/records/claims/${id}`, undefined, 'bob')).status).toBe(204);
    expect(await call('PUT', `/mcp/records/claims/${id}`, undefined, 'alice')).toEqual({ status: 200, json: { claimed_before: true } });
    expect((await call('DELETE', `/mcp/records/claims/${id}`, undefined, 'alice')).status).toBe(204);
    expect(await call('PUT', `/mcp/records/claims/${id}`, undefined, 'alice')).toEqual({ status: 200, json: { claimed_before: false } });
    // Noting the message again changes nothing.
    await call('POST', `${message(id)}/seq`, {}, 'alice');
    expect(await call('PUT', message(id), { kind: 'post' }, 'alice')).toMatchObject({ status: 200, json: { kind: 'dm', seq: 1 } });
  });

  it('never hands out one edit seq twice, and exactly one of many claims at once is the first', async () => {
    const id = newRequestId();
    await call('PUT', message(id), { kind: 'post' }, 'racer');
    const seqs = await Promise.all(Array.from({ length: 40 }, () => call('POST', `${message(id)}/seq`, {}, 'racer')));
    expect(seqs.map((r) => r.status)).toEqual(Array(40).fill(200));
    expect(seqs.map((r) => r.json?.['seq'] as number).sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    // One edit id, many times at once: one seq, taken once.
    const editId = newRequestId();
    const same = await Promise.all(Array.from({ length: 20 }, () => call('POST', `${message(id)}/seq`, { edit_id: editId }, 'racer')));
    expect(new Set(same.map((r) => r.json?.['seq']))).toEqual(new Set([41]));
    expect(await call('GET', message(id), undefined, 'racer')).toMatchObject({ json: { seq: 41 } });
    // Many claims of one request_id at once: exactly one was first.
    const claim = newRequestId();
    const claims = await Promise.all(Array.from({ length: 30 }, () => call('PUT', `/mcp/records/claims/${claim}`, undefined, 'racer')));
    expect(claims.map((r) => r.status)).toEqual(Array(30).fill(200));
    expect(claims.filter((r) => r.json?.['claimed_before'] === false)).toHaveLength(1);
  });

  it('imports an older herald mcp\'s records: a message keeps the larger seq, an edit id its seq; the same import again changes nothing', async () => {
    const id = newRequestId();
    const editId = newRequestId();
    const old = newRequestId();
    const sentAt = new Date(clock.now().getTime() - DAY_MS).toISOString();
    const body = {
      messages: { [id]: { kind: 'post', seq: 5, sent_at: sentAt, edits: { [editId]: 4 } }, [old]: { kind: 'post', seq: 9, sent_at: new Date(clock.now().getTime() - 9 * DAY_MS).toISOString() } },
      sent: { [id]: sentAt },
    };
    expect(await call('POST', '/mcp/records/import', body, 'importer')).toEqual({ status: 200, json: { messages: 1, claims: 1 } });
    expect(await call('POST', `${message(id)}/seq`, {}, 'importer')).toEqual({ status: 200, json: { seq: 6 } });
    expect(await call('POST', `${message(id)}/seq`, { edit_id: editId }, 'importer')).toEqual({ status: 200, json: { seq: 4 } });
    expect(await call('POST', '/mcp/records/import', body, 'importer')).toEqual({ status: 200, json: { messages: 1, claims: 1 } });
    expect(await call('GET', message(id), undefined, 'importer')).toMatchObject({ json: { seq: 6 } });
    expect(await call('PUT', `/mcp/records/claims/${id}`, undefined, 'importer')).toEqual({ status: 200, json: { claimed_before: true } });
    // Older than 8 days: not imported.
    expect(await call('GET', message(old), undefined, 'importer')).toEqual({ status: 404, json: { error: 'no such message' } });
    // Imported as this caller's only.
    expect(await call('GET', message(id))).toEqual({ status: 404, json: { error: 'no such message' } });
  });

  it('forgets records after 8 days: an old message can no longer be edited, an old claim is no claim', async () => {
    const id = newRequestId();
    await call('PUT', message(id), { kind: 'post' }, 'aging');
    await call('POST', `${message(id)}/seq`, {}, 'aging');
    await call('PUT', `/mcp/records/claims/${id}`, undefined, 'aging');
    clock.offsetMs += 8 * DAY_MS + 60_000;
    try {
      expect(await call('GET', message(id), undefined, 'aging')).toEqual({ status: 404, json: { error: 'no such message' } });
      expect(await call('POST', `${message(id)}/seq`, {}, 'aging')).toEqual({ status: 404, json: { error: 'no such message' } });
      expect(await call('GET', `/mcp/records/claims/${id}`, undefined, 'aging')).toEqual({ status: 200, json: { owned: false } });
      expect(await call('PUT', `/mcp/records/claims/${id}`, undefined, 'aging')).toEqual({ status: 200, json: { claimed_before: false } });
      // Noted afresh, it starts again from 0.
      expect(await call('PUT', message(id), { kind: 'post' }, 'aging')).toMatchObject({ status: 200, json: { seq: 0 } });
      // The sweep dropped the old rows of every caller (not only this one's).
      const left = await heralds[0]?.herald.store.db.selectFrom('agent_messages').select('request_id').where('sent_at', '<', new Date(clock.now().getTime() - 8 * DAY_MS)).execute();
      expect(left).toEqual([]);
    } finally {
      clock.offsetMs -= 8 * DAY_MS + 60_000;
    }
  });
});
