import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Operation } from 'openapi-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declarationOf, toolsNamed } from '../src/infra/policy/declaration.js';
import { call, contractApi } from './support/client.js';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';

// The operator's policy on the API itself, as a bridge-token caller meets it (black-box, every
// answer checked against the contract by the test client): issue 35 items 3, 6 and 7.
const POLICY = `
clients:
  reader:
    read_only: true
  caps-only:
    tools: [get_capabilities]
  alerts-only:
    destinations: [alerts]
  small:
    files: { max_total_bytes: 1000 }
  confirming:
    confirm: [post_message]
  confirming-too:
    confirm: [post_message]
`;

const CLIENT = 'x-herald-policy-client';
const as = (client: string): { headers: Record<string, string> } => ({ headers: { [CLIENT]: client } });
const sha = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

type Example = { example?: unknown; examples?: Record<string, { value: unknown }> };
const exampleOf = (node: Example | undefined): unknown => node?.example ?? Object.values(node?.examples ?? {})[0]?.value;

/** A request the contract calls valid for the operation: its path and required query parameters from their examples, its body's example. */
function exampleRequest(op: Operation): { path: string; body: unknown } {
  let path = op.path;
  const query = new URLSearchParams();
  for (const p of (op.parameters ?? []) as (Example & { in: string; name: string; required?: boolean })[]) {
    if (p.in === 'path') path = path.replace(`{${p.name}}`, encodeURIComponent(String(exampleOf(p))));
    if (p.in === 'query' && p.required === true) query.set(p.name, String(exampleOf(p)));
  }
  const content = (op.requestBody as { content?: Record<string, Example> } | undefined)?.content?.['application/json'];
  return { path: query.size > 0 ? `${path}?${query}` : path, body: content === undefined ? undefined : exampleOf(content) };
}

describe("the operator's policy on the API", { timeout: 120_000 }, () => {
  let h: TestHerald;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'herald-policy-api-'));
    const file = path.join(dir, 'policy.yaml');
    await writeFile(file, POLICY);
    h = await startTestHerald({ env: { HERALD_POLICY: file } });
    await h.mapDestination('alerts', IDS.channels.alerts);
    await h.mapDestination('ops', IDS.channels.ops);
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const upload = (data: Buffer, client?: string) =>
    h.bridge.call('POST', `/mcp/files?filename=f.bin`, { raw: data, headers: { 'content-type': 'application/octet-stream', ...(client === undefined ? {} : { [CLIENT]: client }) } });

  it('holds on file upload and download too (operations served outside the API binding)', async () => {
    const data = Buffer.from(`policy upload ${Date.now()}`);
    expect((await upload(data, 'reader')).json).toEqual({ error: 'refused by policy: read_only' });
    const capsOnly = await upload(data, 'caps-only');
    expect(capsOnly.status).toBe(403);
    expect(capsOnly.json).toEqual({ error: 'refused by policy: tools' });
    // The connector (no rules) uploads; a client limited to get_capabilities cannot read it back.
    expect((await upload(data)).status).toBe(201);
    const read = await h.bridge.get(`/mcp/files/${sha(data)}`, as('caps-only'));
    expect(read.status).toBe(403);
    expect(read.json).toEqual({ error: 'refused by policy: tools' });
    expect((await fetch(`${h.url}/mcp/files/${sha(data)}`, { headers: { authorization: `Bearer ${h.bridgeToken}` } })).status).toBe(200);
  });

  it('holds on every operation the bridge token reaches, however it is served: each one the rules turn off is refused', async () => {
    const operations = (await contractApi()).getOperations().filter((op) => ((op.security ?? [{ bridgeToken: [] }]) as Record<string, unknown>[]).some((r) => 'bridgeToken' in r));
    expect(operations.length).toBeGreaterThan(30);
    const problems: string[] = [];
    for (const op of operations) {
      const declaration = declarationOf(op).declaration;
      const { path, body } = exampleRequest(op);
      const ask = async (client: string) => {
        const res = await call(h.url, op.method.toUpperCase(), path, { token: h.bridgeToken, headers: { [CLIENT]: client }, ...(body !== undefined ? { body } : op.requestBody !== undefined ? { raw: 'x' } : {}) });
        return JSON.stringify(res.json);
      };
      // A client limited to get_capabilities: every operation that does not serve it is off.
      const tools = await ask('caps-only');
      const off = !toolsNamed(declaration ?? { access: 'admin' }).includes('get_capabilities');
      if (off !== (tools === '{"error":"refused by policy: tools"}')) problems.push(`${op.operationId} as caps-only: ${tools}`);
      // A read-only client: every operation that changes something is refused (reads are not called: they would run).
      if (declaration?.access !== 'read') {
        const readOnly = await ask('reader');
        if (readOnly !== '{"error":"refused by policy: read_only"}') problems.push(`${op.operationId} as reader: ${readOnly}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('caps what a client keeps uploaded (files.max_total_bytes); the same bytes again count once', async () => {
    const a = Buffer.alloc(600, 'a');
    const b = Buffer.alloc(600, 'b');
    expect((await upload(a, 'small')).status).toBe(201);
    expect((await upload(a, 'small')).status).toBe(200);
    const over = await upload(b, 'small');
    expect(over.status).toBe(403);
    expect(over.json).toEqual({ error: 'refused by policy: files' });
    // Refused before it was kept: the store does not hold it.
    expect((await h.bridge.get(`/mcp/files/${sha(b)}`)).status).toBe(404);
    // Another client's uploads are its own.
    expect((await upload(b, 'reader-of-nothing')).status).toBe(201);
  });

  it('an operation that serves no tool of the list is off: a get_capabilities client cannot ack handoffs or poll deliveries', async () => {
    const ack = await h.bridge.post('/mcp/handoffs/inbox/ack', { ids: ['1'] }, as('caps-only'));
    expect(ack.status).toBe(403);
    expect(ack.json).toEqual({ error: 'refused by policy: tools' });
    // Answered by a shortcut past the contract's binding before; the policy is asked first now.
    const poll = await h.bridge.get(`/mcp/deliveries/${'f'.repeat(64)}`, as('caps-only'));
    expect(poll.json).toEqual({ error: 'refused by policy: tools' });
    expect((await h.bridge.get('/mcp/capabilities', as('caps-only'))).status).toBe(200);
  });

  it('destinations hold for edits, reactions and deletes by message_ref: where the original went', async () => {
    const inOps = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', { ...post(inOps, `ops post ${inOps}`), target: { guild_id: IDS.guild, destination: 'ops' } })).status).toBe(202);
    await h.waitForState(inOps, 'delivered');
    const edit = { request_id: newRequestId(), kind: 'edit', target: { message_ref: inOps, seq: 1 }, body: { content: 'rewritten by a client limited to alerts' } };
    const react = { request_id: newRequestId(), kind: 'reaction', target: { message_ref: inOps }, body: { emoji: '👍' } };
    const del = { request_id: newRequestId(), kind: 'delete', target: { message_ref: inOps } };
    for (const body of [edit, react, del]) {
      const res = await h.bridge.post('/mcp/deliveries', body, as('alerts-only'));
      expect(res.json, body.kind).toEqual({ error: 'refused by policy: destinations' });
    }
    // A reference to nothing Herald sent is not let through a destinations rule either.
    const unknown = await h.bridge.post('/mcp/deliveries', { ...edit, request_id: newRequestId(), target: { message_ref: 'e'.repeat(64), seq: 1 } }, as('alerts-only'));
    expect(unknown.json).toEqual({ error: 'refused by policy: destinations' });
    // Text the store cannot hold in a reference or a retry key never reaches a statement (asked before the input gate).
    const unstorable = await h.bridge.post('/mcp/deliveries', { ...edit, request_id: 'a\u0000\ud800', target: { message_ref: 'b\u0000', seq: 1 } }, as('alerts-only'));
    expect(unstorable.status).toBe(403);
    // Its own post in alerts it may edit.
    const inAlerts = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(inAlerts, `alerts post ${inAlerts}`), as('alerts-only'))).status).toBe(202);
    const ownEdit = await h.bridge.post('/mcp/deliveries', { ...edit, request_id: newRequestId(), target: { message_ref: inAlerts, seq: 1 } }, as('alerts-only'));
    expect(ownEdit.status).toBe(202);
  });

  it('confirm is two calls on the API too: the first answers what would happen and a one-use token, bound to the call', async () => {
    const id = newRequestId();
    const body = post(id, `confirm me ${id}`);
    const first = await h.bridge.post('/mcp/deliveries', body, as('confirming'));
    expect(first.status).toBe(428);
    const answer = first.json as { error: string; confirm_token: string; would: Record<string, unknown> };
    expect(answer.error).toBe('confirmation required');
    expect(answer.would).toEqual({ operation: 'createDelivery', tool: 'post_message', access: 'write', destination: 'alerts' });
    expect(h.sandbox.allMessages().filter((m) => m.content === `confirm me ${id}`)).toHaveLength(0);
    const confirmed = (b: unknown, client = 'confirming') => h.bridge.post('/mcp/deliveries', b, { headers: { [CLIENT]: client, 'herald-confirm': answer.confirm_token } });
    // Bound to the arguments and to the caller.
    expect(((await confirmed({ ...body, body: { content: 'something else' } })).json as { error: string }).error).toBe('confirmation required: the herald-confirm token is not for this call');
    expect(((await confirmed(body, 'confirming-too')).json as { error: string }).error).toBe('confirmation required: the herald-confirm token is not for this call');
    const ok = await confirmed(body);
    expect(ok.status).toBe(202);
    // A retry of that same call still passes; another call with the same token does not.
    expect((await confirmed(body)).status).toBe(202);
    const reuse = await confirmed({ ...body, request_id: newRequestId() });
    expect(reuse.status).toBe(428);
    expect((reuse.json as { error: string }).error).toBe('confirmation required: the herald-confirm token is not for this call');
  });
});
