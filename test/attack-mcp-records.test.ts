import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBridgeClient } from '../src/client/bridge-client.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/log.js';
import { POLICY_CLIENT_HEADER } from '../src/infra/http/policy.middleware.js';
import { parseTraceparent } from '../src/infra/trace.js';
import { startHttp } from '../src/mcp/run.js';
import { importRecordsFile } from '../src/mcp/state.js';
import { moduleContracts } from '../src/mcp/tools.js';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, newRequestId, newToken, startTestHerald, TestClock, type TestHerald } from './support/herald.js';
import { onPostgres, testDatabase, type TestDatabase } from './support/db.js';
import { MODERN_REVISION, modernOverHttp } from './support/mcp-v2.js';
import { localIssuer, type LocalIssuer } from './support/oauth.js';
import { waitFor } from './support/wait.js';

const DAY_MS = 24 * 60 * 60_000;
const INT4_MAX = 2_147_483_647;

/**
 * A hostile look at `/mcp/records/` (openapi/records.yaml, src/modules/deliveries/agent-records.ts)
 * and at what `herald mcp` does with it (src/mcp/state.ts): as a caller naming itself another
 * principal, as the holder of the wrong token, as an import planting records, as many calls at once
 * (on two replicas of one PostgreSQL database when TEST_DATABASE_URL names one). An attack that holds
 * is a passing test; each hole it found is a test of the fix, with a "Was a hole:" comment.
 */
describe('attack: agent records (/mcp/records/) and the import of an older herald mcp', { timeout: 120_000 }, () => {
  let sandbox: DiscordSandbox;
  let db: TestDatabase;
  let clock: TestClock;
  const heralds: TestHerald[] = [];
  let dir: string;

  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
    db = await testDatabase();
    clock = new TestClock();
    heralds.push(await startTestHerald({ useSandbox: sandbox, useDb: db, clock }));
    if (onPostgres) heralds.push(await startTestHerald({ useSandbox: sandbox, useDb: db, clock, roles: { http: true, dispatcher: false } }));
    dir = await mkdtemp(join(tmpdir(), 'herald-attack-records-'));
  });
  afterAll(async () => {
    for (const h of heralds.reverse()) await h.close();
    await sandbox?.close();
    await db?.drop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  let turn = 0;
  type Answer = { status: number; json: Record<string, unknown> | undefined };
  /** One call; `token` 'bridge' (default), 'admin' or a raw value; `headers` added as they are. */
  const call = async (method: string, path: string, opts: { body?: unknown; client?: string; token?: 'bridge' | 'admin' | string; headers?: [string, string][] } = {}): Promise<Answer> => {
    const h = heralds[turn++ % heralds.length] as TestHerald;
    const token = opts.token === undefined || opts.token === 'bridge' ? h.bridgeToken : opts.token === 'admin' ? h.adminToken : opts.token;
    const headers = new Headers({ authorization: `Bearer ${token}` });
    if (opts.body !== undefined) headers.set('content-type', 'application/json');
    if (opts.client !== undefined) headers.set(POLICY_CLIENT_HEADER, opts.client);
    for (const [k, v] of opts.headers ?? []) headers.append(k, v);
    const res = await fetch(`${h.url}${path}`, { method, headers, ...(opts.body === undefined ? {} : { body: typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body) }) });
    const text = await res.text();
    let json: Record<string, unknown> | undefined;
    try {
      json = text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>);
    } catch {
      json = { text };
    }
    return { status: res.status, json };
  };
  const message = (id: string): string => `/mcp/records/messages/${id}`;
  const claimPath = (id: string): string => `/mcp/records/claims/${id}`;
  const iso = (offsetMs: number): string => new Date(clock.now().getTime() + offsetMs).toISOString();

  it('a client naming itself "connector", an empty name, a case variant or a doubled header never reaches another principal', async () => {
    const id = newRequestId();
    expect(await call('PUT', message(id), { body: { kind: 'post' } })).toMatchObject({ status: 200 });
    expect(await call('PUT', message(id), { body: { kind: 'dm' }, client: 'Alice' })).toMatchObject({ status: 200, json: { kind: 'dm' } });
    // "connector" as a client id is client:connector, not the connector.
    expect(await call('GET', message(id), { client: 'connector' })).toEqual({ status: 404, json: { error: 'no such message' } });
    // A case variant is another client.
    expect(await call('GET', message(id), { client: 'alice' })).toEqual({ status: 404, json: { error: 'no such message' } });
    // Two headers: one value "Alice, x", no one's records.
    expect(await call('GET', message(id), { headers: [[POLICY_CLIENT_HEADER, 'Alice'], [POLICY_CLIENT_HEADER, 'x']] })).toEqual({ status: 404, json: { error: 'no such message' } });
    // Names built to look like the hashed form of a long id are still client:<name>.
    expect(await call('GET', message(id), { client: `-sha256:${'0'.repeat(64)}` })).toEqual({ status: 404, json: { error: 'no such message' } });
    // Two long client ids sharing a long prefix are two principals (the long form is a digest of the whole id).
    const long = 'c'.repeat(400);
    expect(await call('PUT', message(id), { body: { kind: 'post' }, client: `${long}1` })).toMatchObject({ status: 200 });
    expect(await call('GET', message(id), { client: `${long}2` })).toEqual({ status: 404, json: { error: 'no such message' } });
    expect(await call('GET', message(id), { client: `${long}1` })).toMatchObject({ status: 200 });
  });

  it('only the bridge token reaches the records: the admin token, with or without a client header, is refused or kept off the bridge principals', async () => {
    const id = newRequestId();
    await call('PUT', message(id), { body: { kind: 'post' }, client: 'victim' });
    await call('PUT', message(id), { body: { kind: 'post' } });
    const asAdmin = await call('GET', message(id), { token: 'admin', client: 'victim' });
    // Either refused outright, or the header is ignored (a non-bridge caller names no client): never the victim's record.
    expect([401, 403, 404]).toContain(asAdmin.status);
    expect(await call('GET', message(id), { token: 'not-a-token', client: 'victim' })).toMatchObject({ status: 401 });
    expect(await call('POST', '/mcp/records/import', { token: 'not-a-token', body: { messages: {} } })).toMatchObject({ status: 401 });
  });

  it('ids at and over the limits are refused naming the field; path tricks reach no other route', async () => {
    for (const bad of ['A'.repeat(64), 'a'.repeat(63), 'a'.repeat(65), `${'a'.repeat(64)}%00`, `${'a'.repeat(32)}%2F${'a'.repeat(31)}`, '..%2F..%2Fimport', 'a'.repeat(10_000)]) {
      const r = await call('GET', message(bad));
      expect([400, 404, 414, 431]).toContain(r.status);
      if (r.status === 400) expect(String(r.json?.['error'])).toContain('request_id');
      expect(r.status).not.toBe(200);
    }
    // Edit ids the same.
    const id = newRequestId();
    await call('PUT', message(id), { body: { kind: 'post' } });
    expect(await call('POST', `${message(id)}/seq`, { body: { edit_id: 'A'.repeat(64) } })).toEqual({ status: 400, json: { error: expect.stringContaining('edit_id') as string } });
    expect(await call('POST', `${message(id)}/seq`, { body: { edit_id: newRequestId(), extra: 1 } })).toMatchObject({ status: 400 });
    // A seq over 32 bits, or fractional, in an import: refused naming seq.
    for (const seq of [INT4_MAX + 1, 1.5, '1']) {
      const r = await call('POST', '/mcp/records/import', { body: { messages: { [newRequestId()]: { kind: 'post', seq, sent_at: iso(0) } } } });
      expect(r).toMatchObject({ status: 400 });
      expect(String(r.json?.['error'])).toMatch(/seq|messages/);
    }
  });

  it('an import over the body limit is a 413, and nothing of it is kept', async () => {
    const messages: Record<string, unknown> = {};
    for (let i = 0; i < 1_000; i += 1) messages[newRequestId()] = { kind: 'post', seq: 1, sent_at: iso(0) };
    const first = Object.keys(messages)[0] as string;
    expect(await call('POST', '/mcp/records/import', { body: { messages }, client: 'bulk' })).toMatchObject({ status: 413 });
    expect(await call('GET', message(first), { client: 'bulk' })).toEqual({ status: 404, json: { error: 'no such message' } });
  });

  // Was a hole: an import could carry seq 2147483647 (the contract's maximum then); the next edit
  // seq was seq + 1, over PostgreSQL's integer, and nextAgentEditSeq answered 500 ("integer out of
  // range") for ever after. The contract now takes seqs up to 1,000,000,000 (openapi/records.yaml).
  it('an imported seq past the contract maximum is refused naming seq; at the maximum the message stays editable', async () => {
    const id = newRequestId();
    const over = await call('POST', '/mcp/records/import', { body: { messages: { [id]: { kind: 'post', seq: INT4_MAX, sent_at: iso(0) } } }, client: 'maxer' });
    expect(over.status).toBe(400);
    expect(JSON.stringify(over.json)).toContain('seq');
    expect(await call('POST', '/mcp/records/import', { body: { messages: { [id]: { kind: 'post', seq: 1_000_000_000, sent_at: iso(0) } } }, client: 'maxer' })).toEqual({ status: 200, json: { messages: 1, claims: 0 } });
    const next = await call('POST', `${message(id)}/seq`, { body: {}, client: 'maxer' });
    expect(next).toEqual({ status: 200, json: { seq: 1_000_000_001 } });
  });

  // Was a hole: an import's sent_at (and a claim's time in `sent`) could lie in the future: such a
  // record was answered, and never swept, until 8 days after that date (year 9999 here): the
  // retention the contract promises ("kept 8 days") did not hold, and the table only grew.
  // AgentRecordsStore.import (src/modules/deliveries/agent-records.ts) now takes such a time as now.
  it('an import dated in the future is not kept beyond the 8-day retention', async () => {
    const id = newRequestId();
    const claim = newRequestId();
    const far = '9999-12-31T00:00:00.000Z';
    const r = await call('POST', '/mcp/records/import', { body: { messages: { [id]: { kind: 'post', seq: 1, sent_at: far } }, sent: { [claim]: far } }, client: 'future' });
    // Refused, or taken as now: either way not kept past the retention.
    expect(r.status === 400 || r.status === 200, JSON.stringify(r)).toBe(true);
    clock.offsetMs += 9 * DAY_MS;
    try {
      expect(await call('GET', message(id), { client: 'future' })).toEqual({ status: 404, json: { error: 'no such message' } });
      expect(await call('GET', claimPath(claim), { client: 'future' })).toEqual({ status: 200, json: { owned: false } });
    } finally {
      clock.offsetMs -= 9 * DAY_MS;
    }
  });

  it("an import plants nothing in another principal's records, and a planted claim gives no one else ownership", async () => {
    const victimId = newRequestId();
    await call('PUT', message(victimId), { body: { kind: 'post' }, client: 'victim2' });
    await call('POST', `${message(victimId)}/seq`, { body: {}, client: 'victim2' });
    // The attacker imports the victim's request_id with a huge seq and a claim of it.
    expect(await call('POST', '/mcp/records/import', { body: { messages: { [victimId]: { kind: 'dm', seq: 1_000_000, sent_at: iso(0) } }, sent: { [victimId]: iso(0) } }, client: 'attacker' })).toEqual({
      status: 200,
      json: { messages: 1, claims: 1 },
    });
    // The victim's record is as it was; its next seq is 2.
    expect(await call('GET', message(victimId), { client: 'victim2' })).toMatchObject({ status: 200, json: { kind: 'post', seq: 1 } });
    expect(await call('POST', `${message(victimId)}/seq`, { body: {}, client: 'victim2' })).toEqual({ status: 200, json: { seq: 2 } });
    // And the victim's own first claim is still the first.
    expect(await call('PUT', claimPath(victimId), { client: 'victim2' })).toEqual({ status: 200, json: { claimed_before: false } });
    // A seq imported lower than the one held never lowers it (no seq handed out twice).
    await call('POST', '/mcp/records/import', { body: { messages: { [victimId]: { kind: 'post', seq: 0, sent_at: iso(0) } } }, client: 'victim2' });
    expect(await call('POST', `${message(victimId)}/seq`, { body: {}, client: 'victim2' })).toEqual({ status: 200, json: { seq: 3 } });
  });

  it('many imports, edits and re-notes of one message at once never hand out one seq twice', async () => {
    const id = newRequestId();
    await call('PUT', message(id), { body: { kind: 'post' }, client: 'mixer' });
    const work: Promise<Answer>[] = [];
    for (let i = 0; i < 30; i += 1) {
      work.push(call('POST', `${message(id)}/seq`, { body: {}, client: 'mixer' }));
      if (i % 3 === 0) work.push(call('POST', '/mcp/records/import', { body: { messages: { [id]: { kind: 'post', seq: i, sent_at: iso(0) } } }, client: 'mixer' }));
      if (i % 5 === 0) work.push(call('PUT', message(id), { body: { kind: 'dm' }, client: 'mixer' }));
    }
    const answers = await Promise.all(work);
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const seqs = answers.filter((a) => a.json !== undefined && Object.keys(a.json).length === 1 && 'seq' in a.json).map((a) => a.json?.['seq'] as number);
    expect(seqs).toHaveLength(30);
    expect(new Set(seqs).size).toBe(30);
  });

  it('an expired record re-noted by many calls at once is noted afresh exactly once (seq 0), and its old edit ids are not its', async () => {
    const id = newRequestId();
    const editId = newRequestId();
    await call('PUT', message(id), { body: { kind: 'post' }, client: 'phoenix' });
    expect(await call('POST', `${message(id)}/seq`, { body: { edit_id: editId }, client: 'phoenix' })).toEqual({ status: 200, json: { seq: 1 } });
    clock.offsetMs += 8 * DAY_MS + 60_000;
    try {
      const notes = await Promise.all(Array.from({ length: 12 }, () => call('PUT', message(id), { body: { kind: 'dm' }, client: 'phoenix' })));
      expect(notes.map((n) => n.status)).toEqual(Array(12).fill(200));
      expect(new Set(notes.map((n) => `${String(n.json?.['kind'])}:${String(n.json?.['seq'])}:${String(n.json?.['sent_at'])}`)).size).toBe(1);
      // The old edit id took seq 1 of the old message: the new one gives it a new seq (1 again, from 0), taken once.
      const again = await Promise.all(Array.from({ length: 6 }, () => call('POST', `${message(id)}/seq`, { body: { edit_id: editId }, client: 'phoenix' })));
      expect(new Set(again.map((a) => a.json?.['seq']))).toEqual(new Set([1]));
      expect(await call('POST', `${message(id)}/seq`, { body: {}, client: 'phoenix' })).toEqual({ status: 200, json: { seq: 2 } });
    } finally {
      clock.offsetMs -= 8 * DAY_MS + 60_000;
    }
  });

  // Was a hole: importRecordsFile (src/mcp/state.ts) cuts a file into calls of IMPORT_BATCH (500)
  // messages and 500 claims each, by count, not by size: 500 messages and 500 claims are about
  // 110 KB of JSON, over the API's body limit (MAX_BODY_BYTES, 64 KiB, src/infra/http/body.ts), so
  // Herald answers 413 and the import stops; the file stays, and every start tries (and fails)
  // again: an older herald mcp's file of a few hundred messages and claims is never imported. Fix: in
  // importRecordsFile, cut batches by their JSON size (add entries while
  // Buffer.byteLength(JSON.stringify(body)) stays under MAX_BODY_BYTES less a margin), or lower
  // IMPORT_BATCH to a count whose worst case (a message with edits) fits; edits per message also
  // need a bound (openapi/records.yaml ImportedMessage.edits maxProperties).
  it('an older herald mcp file of 600 messages and 600 claims is imported whole, and renamed .imported', async () => {
    const h = heralds[0] as TestHerald;
    const file = join(dir, 'state.json');
    const messages: Record<string, unknown> = {};
    const sent: Record<string, string> = {};
    for (let i = 0; i < 600; i += 1) {
      const id = newRequestId();
      messages[id] = { kind: 'post', seq: 2, sent_at: iso(-DAY_MS) };
      sent[id] = iso(-DAY_MS);
    }
    await writeFile(file, JSON.stringify({ clients: { bigfile: { messages, sent } } }));
    const bridgeFor = (client: string | undefined) =>
      createBridgeClient({ baseUrl: h.url, token: h.bridgeToken, headers: client === undefined ? {} : { [POLICY_CLIENT_HEADER]: client }, contracts: moduleContracts() });
    await importRecordsFile(file, bridgeFor, pino({ level: 'silent' }));
    await expect(stat(`${file}.imported`)).resolves.toBeDefined();
    const last = Object.keys(messages).at(-1) as string;
    expect(await call('GET', message(last), { client: 'bigfile' })).toMatchObject({ status: 200, json: { seq: 2 } });
    await rm(`${file}.imported`, { force: true });
  });

  it('a file of records for another client imports as that client only: the importer is herald mcp, and the file names the principals', async () => {
    // The file is the operator's (HERALD_MCP_STATE): whoever writes it speaks for every client in it.
    // What holds: a small file imports, each sender's records as its own, and the file is renamed.
    const h = heralds[0] as TestHerald;
    const file = join(dir, 'small.json');
    const mine = newRequestId();
    const theirs = newRequestId();
    await writeFile(file, JSON.stringify({ messages: { [mine]: { kind: 'post', seq: 3, sent_at: iso(-DAY_MS) } }, clients: { other: { messages: { [theirs]: { kind: 'dm', seq: 1, sent_at: iso(-DAY_MS) } } } } }));
    const bridgeFor = (client: string | undefined) =>
      createBridgeClient({ baseUrl: h.url, token: h.bridgeToken, headers: client === undefined ? {} : { [POLICY_CLIENT_HEADER]: client }, contracts: moduleContracts() });
    await importRecordsFile(file, bridgeFor, pino({ level: 'silent' }));
    expect(JSON.parse(await readFile(`${file}.imported`, 'utf8'))).toBeDefined();
    expect(await call('GET', message(mine))).toMatchObject({ status: 200, json: { seq: 3 } });
    expect(await call('GET', message(mine), { client: 'other' })).toEqual({ status: 404, json: { error: 'no such message' } });
    expect(await call('GET', message(theirs), { client: 'other' })).toMatchObject({ status: 200, json: { kind: 'dm' } });
    expect(await call('GET', message(theirs))).toEqual({ status: 404, json: { error: 'no such message' } });
  });
});

describe('attack: traceparent (src/infra/trace.ts)', () => {
  it('takes only a well-formed version-00 value: newlines, JSON, huge, upper case, extra fields and zero ids are no trace', () => {
    const good = `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`;
    expect(parseTraceparent(good)).toEqual({ trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16), traceparent: good });
    for (const bad of [
      `${good}\n{"level":60,"msg":"forged"}`,
      `${good}\r\n`,
      `\n${good}`,
      `${good}-extra`,
      `00-${'A'.repeat(32)}-${'b'.repeat(16)}-01`,
      `01-${'a'.repeat(32)}-${'b'.repeat(16)}-01`,
      `00-${'0'.repeat(32)}-${'b'.repeat(16)}-01`,
      `00-${'a'.repeat(32)}-${'0'.repeat(16)}-01`,
      `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01${' '.repeat(100_000)}`,
      'x'.repeat(1_000_000),
      '{"trace_id":"x"}',
      [good],
      { toString: () => good },
    ]) expect(parseTraceparent(bad)).toBeUndefined();
  });
});

/**
 * `herald mcp --http` on 2026-07-28: the inbox as a subscription and scrape_media's tasks, as a
 * hostile OAuth client (src/mcp/run.ts listen, src/mcp/inbox-notify.ts InboxFeed, src/mcp/server.ts
 * tasks/get and tasks/cancel).
 */
describe('attack: herald mcp listens and tasks', { timeout: 180_000 }, () => {
  type Updated = { uri: string; _meta?: Record<string, unknown> };
  let h: TestHerald;
  let issuer: LocalIssuer;
  let dir: string;
  let server: HttpServer;
  let url: string;
  const token = newToken();
  const clients: Client[] = [];
  let n = 0;

  const mention = async (content: string): Promise<string> => {
    const res = await fetch(`${h.sandbox.url}/sandbox/api/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: IDS.user, channelId: IDS.channels.ops, content: `<@${h.sandbox.bot.id}> ${content}` }),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  };
  const connect = async (name: string, bearer: string): Promise<{ client: Client; heard: Updated[] }> => {
    const client = await modernOverHttp(name, url, bearer);
    clients.push(client);
    const heard: Updated[] = [];
    client.setNotificationHandler('notifications/resources/updated', (note) => {
      heard.push(note.params as Updated);
    });
    return { client, heard };
  };
  /** One raw 2026-07-28 request (as test/mcp-tasks.test.ts sends them). */
  const rpc = async (method: string, params: Record<string, unknown>, bearer = token, extra: Record<string, string> = {}): Promise<{ status: number; text: string; result?: Record<string, unknown>; error?: { code: number; message: string } }> => {
    n += 1;
    const res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN_REVISION, 'mcp-method': method, ...extra },
      body: JSON.stringify({ jsonrpc: '2.0', id: n, method, params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN_REVISION, 'io.modelcontextprotocol/clientCapabilities': {} } } }),
    });
    const text = await res.text();
    let parsed: { result?: Record<string, unknown>; error?: { code: number; message: string } } = {};
    try {
      parsed = JSON.parse(text.startsWith('{') ? text : (/^data: (.*)$/m.exec(text)?.[1] ?? '{}')) as typeof parsed;
    } catch {
      parsed = {};
    }
    return { status: res.status, text, ...parsed };
  };

  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.gatewaySessions === 1 && h.sandbox.commands.length > 0, 'Herald on the gateway', 120_000);
    await h.mapDestination('ops', IDS.channels.ops);
    issuer = await localIssuer();
    dir = await mkdtemp(join(tmpdir(), 'herald-attack-listen-'));
    const config = loadConfig({ HERALD_URL: h.url, MCP_BRIDGE_TOKEN: h.bridgeToken, HERALD_MCP_STATE: join(dir, 'state.json'), HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: token, HERALD_MCP_OAUTH_ISSUER: issuer.url });
    ({ url, server } = await startHttp(config, h.bridgeToken, token, createLogger('silent')));
  }, 180_000);
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
    await issuer?.close();
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("another caller's inbox URI in any spelling is refused before a stream opens: case, encodings, a trailing slash, a non-array filter", async () => {
    const agent = await issuer.sign({ client_id: 'agent', sub: 'alice', scope: 'read', aud: url });
    for (const uri of ['herald://inbox/Connector', 'HERALD://inbox/connector', 'herald://inbox/connector/', 'herald://inbox/%63onnector', 'herald://inbox/agent/../connector', 'herald://inbox/agent%2F..%2Fconnector', 'herald://inbox/agent ', 'herald://inbox/AGENT']) {
      const r = await rpc('subscriptions/listen', { notifications: { resourceSubscriptions: [uri] } }, agent);
      expect(r.status).toBe(400);
      expect(r.error?.message).toContain('notifications.resourceSubscriptions');
    }
    // A filter that is not a list opens no feed and hears nothing: refused by the SDK, or an empty honored filter.
    const odd = await rpc('subscriptions/listen', { notifications: { resourceSubscriptions: 'herald://inbox/connector' } }, agent);
    expect(odd.text).not.toContain('resources/updated');
    // A huge URI is cut in the refusal's words (never echoed whole).
    const huge = await rpc('subscriptions/listen', { notifications: { resourceSubscriptions: [`herald://inbox/${'x'.repeat(5_000)}`] } }, agent);
    expect([400, 413]).toContain(huge.status);
    expect(huge.text.length).toBeLessThan(2_000);
  });

  // Was a hole: inboxUri (src/mcp/inbox-notify.ts) names the connector's inbox `herald://inbox/connector`
  // and an OAuth client's `herald://inbox/<encodeURIComponent(client_id)>`: a client whose id is
  // "connector" has the connector's URI. Its listen passes the own-URI check in run.ts (listen), and
  // InboxFeed keys its watchers and its bus by URI: that client hears the connector's inbox events
  // (event id, kind, channel id), and the connector hears the client's (whichever listens first
  // decides whose inbox the shared watcher reads). The records are kept apart (principalName gives
  // "client:connector"); the URIs are not. Fix: inboxUri gives clients a namespace the connector's
  // name cannot fall in (e.g. `herald://inbox/client/<encodeURIComponent(id)>`, an encoded id holds
  // no '/'), or InboxFeed.open and the bus key by principalName (src/infra/policy/principal.ts)
  // rather than by URI and the listen stream carries that key.
  it('an OAuth client whose id is "connector" hears none of the connector\'s inbox events', async () => {
    const { client: connector, heard: connectorHeard } = await connect('the-connector', token);
    const sub = await connector.listen({ resourceSubscriptions: ['herald://inbox/connector'] });
    const impostorToken = await issuer.sign({ client_id: 'connector', sub: 'mallory', scope: 'read', aud: url });
    const { client: impostor, heard: impostorHeard } = await connect('impostor', impostorToken);
    const spy = await impostor.listen({ resourceSubscriptions: ['herald://inbox/connector'] }).catch(() => undefined);
    const before = connectorHeard.length;
    await mention(`for the connector only ${Date.now()}`);
    await waitFor(() => (connectorHeard.length > before ? true : undefined), "the connector's notification", 30_000);
    const leaked = await waitFor(() => (impostorHeard.length > 0 ? impostorHeard : undefined), 'a leak to the impostor', 3_000).catch(() => undefined);
    await spy?.close();
    await sub.close();
    expect(leaked).toBeUndefined();
  });

  /** A raw listen whose stream is never read: its status and media type once the headers are in; `close` aborts it. */
  const openListen = async (bearer: string, uris: string[]): Promise<{ status: number; type: string; first: string; close: () => void }> => {
    n += 1;
    const abort = new AbortController();
    const res = await fetch(url, {
      method: 'POST',
      signal: abort.signal,
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN_REVISION, 'mcp-method': 'subscriptions/listen' },
      body: JSON.stringify({ jsonrpc: '2.0', id: n, method: 'subscriptions/listen', params: { notifications: { resourceSubscriptions: uris }, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN_REVISION, 'io.modelcontextprotocol/clientCapabilities': {} } } }),
    });
    const type = res.headers.get('content-type') ?? '';
    // A JSON answer is whole; a stream's first frame is read, then the stream is left unread.
    const first = type.includes('json') ? await res.text() : new TextDecoder().decode((await res.body?.getReader().read())?.value ?? new Uint8Array());
    return { status: res.status, type, first, close: () => abort.abort() };
  };

  // Was a hole: every listen stream of every caller counts against one limit, the SDK's listen router's
  // (1024, DEFAULT_MAX_SUBSCRIPTIONS, shared by the one createMcpHandler in src/mcp/run.ts); run.ts's
  // listen caps nothing per caller (HTTP+SSE has MAX_SSE_SESSIONS_PER_TOKEN, listens have no such
  // cap). One OAuth client opening 1024 listens it never reads shuts every other caller, the
  // connector too, out of the inbox subscription ("Subscription limit reached"). Fix: in run.ts
  // listen, count open listen streams per principal (as the SSE sessions are counted) and answer 429
  // with Retry-After over a small cap (e.g. 8), releasing the count in its finally.
  it("one client holding many unread listens does not shut another caller's listen out", async () => {
    const hogToken = await issuer.sign({ client_id: 'hog', sub: 'mallory', scope: 'read', aud: url });
    const held: { status: number; close: () => void }[] = [];
    try {
      for (let i = 0; i < 1_030; i += 32) {
        const batch = await Promise.all(Array.from({ length: 32 }, () => openListen(hogToken, ['herald://inbox/client/hog'])));
        held.push(...batch);
        if (batch.some((b) => b.status !== 200 || !b.type.includes('event-stream'))) break;
      }
      // The hog was stopped by its own cap (429), not by a refusal of its URI.
      expect(held.some((h) => h.status === 429)).toBe(true);
      expect(held.filter((h) => h.status === 200)).toHaveLength(8);
      const mine = await openListen(token, ['herald://inbox/connector']);
      held.push(mine);
      expect(mine.first).not.toContain('limit reached');
      expect(mine.type).toContain('event-stream');
    } finally {
      for (const h of held) h.close();
    }
  });

  it('forged task ids (no prefix, empty, path tricks, case, huge) are refused naming taskId; nothing else is reached', async () => {
    for (const taskId of ['scrape:', 'SCRAPE:00000000-0000-4000-8000-000000000000', 'scrape:../../mcp/records/import', 'scrape:..%2F..%2Fadmin', 'scrape:00000000-0000-4000-8000-000000000000\n', 'scrape:00000000-0000-4000-8000-000000000000/../x', `scrape:${'a'.repeat(20_000)}`]) {
      for (const method of ['tasks/get', 'tasks/cancel']) {
        // The Mcp-Name header names the task when it can be a header at all (a newline cannot).
        const r = await rpc(method, { taskId }, token, /^[\x20-\x7e]{1,8000}$/.test(taskId) ? { 'mcp-name': taskId } : {});
        expect(r.result).toBeUndefined();
        // -32602 naming taskId; or the SDK's refusal of a request whose Mcp-Name header does not match it (-32020).
        expect([-32602, -32020]).toContain(r.error?.code);
        if (r.error?.code === -32602) expect(r.error.message).toContain('taskId');
      }
    }
    // A client that never declared the extension, or holds a token without get_media_scrape, reaches no job either.
    const scopeless = await issuer.sign({ client_id: 'nobody', sub: 'eve', scope: 'none', aud: url });
    const r = await rpc('tasks/get', { taskId: 'scrape:00000000-0000-4000-8000-000000000000' }, scopeless, { 'mcp-name': 'scrape:00000000-0000-4000-8000-000000000000' });
    expect(r.result).toBeUndefined();
    expect(r.error?.code).toBe(-32602);
  });
});

describe('attack: OAuth without HERALD_MCP_RESOURCE off loopback (src/mcp/run.ts startHttp)', { timeout: 60_000 }, () => {
  let issuer: LocalIssuer;
  let dir: string;
  beforeAll(async () => {
    issuer = await localIssuer();
    dir = await mkdtemp(join(tmpdir(), 'herald-attack-resource-'));
  });
  afterAll(async () => {
    await issuer?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('every spelling of "all interfaces" (and a name that only looks local) is refused at start-up, naming the variable', async () => {
    const token = newToken();
    for (const host of ['0', '0.0.0.0', '::', '[::]', '127.0.0.1.nip.io', 'localhost.']) {
      const config = loadConfig({ HERALD_URL: 'http://127.0.0.1:9', MCP_BRIDGE_TOKEN: newToken(), HERALD_MCP_STATE: join(dir, 'state.json'), HERALD_MCP_PORT: '0', HERALD_MCP_TOKEN: token, HERALD_MCP_OAUTH_ISSUER: issuer.url, HOST: host });
      await expect(startHttp(config, newToken(), token, createLogger('silent')), host).rejects.toThrow(/HERALD_MCP_RESOURCE must be set/);
    }
  });
});
