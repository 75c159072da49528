import type { Operation } from 'openapi-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SchemaNode } from '../src/infra/contract/spec.js';
import { call, contractApi } from './support/client.js';
import { IDS, newRequestId, startTestHerald, type TestHerald } from './support/herald.js';

/**
 * Bad input is a 4xx that names the field, on every operation the contract has: one request per
 * field, built from the contract itself (its examples as the valid baseline), so an operation or a
 * field added later is covered too. Two kinds of bad input: text PostgreSQL's text or jsonb refuses
 * (U+0000: it was a 500 `invalid byte sequence`; a lone surrogate, which a `json` column takes and
 * every later read of the row fails on), in every operation, those whose handlers validate their
 * own bodies too (POST /mcp/deliveries); and a value the field's schema refuses. Answers are
 * checked against the contract (the client does), so a 400 an operation does not declare fails as
 * well. For schema refusals POST /mcp/deliveries keeps the protocol's own checks
 * (validation.test.ts); pair/redeem keeps the protocol's fixed `malformed request`.
 */

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: SchemaNode;
  example?: unknown;
  'x-herald-invalid'?: { status: number; error: string };
}

interface Case {
  name: string;
  method: string;
  path: string;
  body?: unknown;
  /** The field the answer must name (a query parameter, or a body field's top-level name). */
  field: string;
  /** The protocol's fixed answer for this operation's bad bodies, when it has one. */
  fixed?: { status: number; error: string };
}

const NUL = 'a\u0000b';
/** What a JSON body can carry that no UTF-8 text can: a high surrogate alone, a low one alone. */
const LONE_HIGH = '#a\ud800';
const LONE_LOW = '\udc00b';
/** Text PostgreSQL cannot store, by name. */
const UNSTORABLE: Readonly<Record<string, string>> = { NUL, LONE_HIGH, LONE_LOW };

function parameters(op: Operation): Parameter[] {
  return (op.parameters ?? []) as unknown as Parameter[];
}

function bodyOf(op: Operation): { schema: SchemaNode; example: Record<string, unknown>; examples: Record<string, unknown>[] } | undefined {
  const media = (op.requestBody as { content?: Record<string, { schema?: SchemaNode; example?: unknown; examples?: Record<string, { value: unknown }> }> } | undefined)?.content?.['application/json'];
  if (media?.schema === undefined) return undefined;
  const examples = (media.example !== undefined ? [media.example] : Object.values(media.examples ?? {}).map((e) => e.value)).map((e) => structuredClone(e) as Record<string, unknown>);
  return { schema: media.schema, example: structuredClone(examples[0] ?? {}), examples };
}

/** Every string an example holds, with its place (an array's first item as `name[]`). */
function exampleStrings(value: unknown, path: string[] = []): string[][] {
  if (typeof value === 'string') return [path];
  if (Array.isArray(value)) return value.length > 0 ? exampleStrings(value[0], [...path.slice(0, -1), `${path.at(-1) ?? ''}[]`]) : [];
  if (typeof value === 'object' && value !== null) return Object.entries(value).flatMap(([k, child]) => exampleStrings(child, [...path, k]));
  return [];
}

/** The operation's path with each path parameter's example, and its required query parameters' examples. */
function baseline(op: Operation, query: Record<string, string> = {}): string {
  let path = op.path;
  for (const p of parameters(op).filter((p) => p.in === 'path')) path = path.replace(`{${p.name}}`, encodeURIComponent(String(p.example)));
  const q = new URLSearchParams();
  for (const p of parameters(op).filter((p) => p.in === 'query' && p.required === true && !(p.name in query))) q.set(p.name, String(p.example ?? 'x'));
  for (const [k, v] of Object.entries(query)) q.set(k, v);
  const s = q.toString();
  return s === '' ? path : `${path}?${s}`;
}

/** A value `schema` refuses, of the right JSON type where the schema allows a stricter check. */
function refused(schema: SchemaNode, asQuery: boolean): unknown {
  const type = schema.type;
  if (Array.isArray(schema['enum'])) return 'not-one-of-them';
  if (type === 'integer' || type === 'number') return asQuery ? 'x' : 'x';
  if (type === 'boolean') return asQuery ? 'maybe' : 'yes';
  if (type === 'array') return asQuery ? '' : 'x';
  if (type === 'object') return 'x';
  if (typeof schema['pattern'] === 'string') return '!';
  if (typeof schema['maxLength'] === 'number') return 'x'.repeat((schema['maxLength'] as number) + 1);
  return asQuery ? undefined : 12345;
}

/** Every string a body's schema holds, with its place (`ids[]` for the strings of an array). */
function stringFields(schema: SchemaNode, path: string[] = []): string[][] {
  if (schema.type === 'string') return [path];
  if (schema.type === 'array' && schema.items !== undefined) return stringFields(schema.items, [...path.slice(0, -1), `${path.at(-1) ?? ''}[]`]);
  return Object.entries(schema.properties ?? {}).flatMap(([k, child]) => stringFields(child, [...path, k]));
}

/** `example` with the value at `path` (`['ids[]']`: the array's first item) replaced. */
function withValue(example: Record<string, unknown>, path: string[], value: unknown): Record<string, unknown> {
  const copy = structuredClone(example);
  let node: Record<string, unknown> = copy;
  for (const [i, key] of path.entries()) {
    const last = i === path.length - 1;
    if (key.endsWith('[]')) {
      const name = key.slice(0, -2);
      const list = Array.isArray(node[name]) ? (node[name] as unknown[]) : [];
      node[name] = list;
      if (last) list[0] = value;
      else node = (list[0] ??= {}) as Record<string, unknown>;
    } else if (last) node[key] = value;
    else node = (node[key] ??= {}) as Record<string, unknown>;
  }
  return copy;
}

/**
 * Text no store can hold in every string of every operation's query and body (each example's, and
 * each the schema describes), and in a key of each body: one case each. Nothing is left out, the
 * operations whose handlers validate their own bodies included.
 */
async function unstorableCases(): Promise<Case[]> {
  const api = await contractApi();
  const out: Case[] = [];
  for (const op of api.getOperations()) {
    if ((op as Record<string, unknown>)['x-herald-outside-api'] === true) continue;
    const fixed = (op as Record<string, unknown>)['x-herald-invalid-body'] as Case['fixed'];
    const method = op.method.toUpperCase();
    // A query is UTF-8 on the wire: a lone surrogate cannot be written in it (it decodes as U+FFFD).
    for (const p of parameters(op).filter((p) => p.in === 'query' && p.schema?.type === 'string')) {
      out.push({ name: `${op.operationId} ?${p.name} NUL`, method, path: baseline(op, { [p.name]: NUL }), field: p.name });
    }
    const body = bodyOf(op);
    if (body === undefined) continue;
    for (const [i, example] of body.examples.entries()) {
      const seen = new Set<string>();
      const fields = [...exampleStrings(example), ...(i === 0 ? stringFields(body.schema) : [])].filter((f) => !seen.has(f.join('.')) && seen.add(f.join('.')));
      for (const path of fields) {
        for (const [what, value] of Object.entries(UNSTORABLE)) {
          const top = (path[0] ?? '').replace(/\[\]$/, '');
          out.push({ name: `${op.operationId}#${i} ${path.join('.')} ${what}`, method, path: baseline(op), body: withValue(example, path, value), field: top, ...(fixed ? { fixed } : {}) });
        }
      }
    }
    for (const [what, value] of Object.entries(UNSTORABLE)) {
      out.push({ name: `${op.operationId} a key ${what}`, method, path: baseline(op), body: { ...body.example, [`k${value}`]: 'x' }, field: 'key', ...(fixed ? { fixed } : {}) });
    }
  }
  return out;
}

async function refusedCases(): Promise<Case[]> {
  const api = await contractApi();
  const out: Case[] = [];
  for (const op of api.getOperations()) {
    if ((op as Record<string, unknown>)['x-herald-outside-api'] === true || op.operationId === 'createDelivery') continue;
    const fixed = (op as Record<string, unknown>)['x-herald-invalid-body'] as Case['fixed'];
    const method = op.method.toUpperCase();
    for (const p of parameters(op).filter((p) => p.in === 'query')) {
      const value = refused(p.schema ?? {}, true);
      if (value === undefined) continue;
      out.push({ name: `${op.operationId} ?${p.name}`, method, path: baseline(op, { [p.name]: String(value) }), field: p.name });
    }
    const body = bodyOf(op);
    if (body === undefined) continue;
    for (const path of Object.keys(body.schema.properties ?? {}).map((k) => [k])) {
      const top = path[0] ?? '';
      out.push({ name: `${op.operationId} ${top}`, method, path: baseline(op), body: withValue(body.example, path, refused(body.schema.properties?.[top] ?? {}, false)), field: top, ...(fixed ? { fixed } : {}) });
    }
  }
  return out;
}

describe('every operation answers bad input with a 4xx that names the field', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ env: { HERALD_TRUSTED_BOT_IDS: '111111111111111112' } });
  });
  afterAll(() => h.close());

  /** What is wrong with the answer to one case (none: undefined). Every answer is valid by the contract too (the client checks). */
  const problem = async (c: Case): Promise<string | undefined> => {
    const token = c.path.startsWith('/admin/') ? h.adminToken : h.bridgeToken;
    const res = await call(h.url, c.method, c.path, { token, ...(c.body !== undefined ? { body: c.body } : {}) });
    const error = String((res.json as { error?: unknown } | undefined)?.error);
    const wrong = `${c.name}: ${res.status} ${res.text.slice(0, 160)}`;
    if (c.fixed !== undefined) return res.status === c.fixed.status && error === c.fixed.error ? undefined : wrong;
    return res.status === 400 && new RegExp(`(^|[^A-Za-z_])${c.field}([^A-Za-z_]|$)`).test(error) ? undefined : wrong;
  };
  const problems = async (all: Case[]): Promise<string[]> => {
    const found: string[] = [];
    for (const c of all) {
      // An answer the contract does not allow (a 500) fails inside the client: listed like the rest.
      const p = await problem(c).catch((err: unknown) => `${c.name}: ${JSON.stringify((err as { actual?: unknown }).actual ?? String(err))}`);
      if (p !== undefined) found.push(p);
    }
    return found;
  };

  it('text holding U+0000 or a lone surrogate, in any query parameter, body field or key of any operation: 400 naming it (never 2xx, never a 500 from the store)', async () => {
    const all = await unstorableCases();
    // What the security reviews found, among the rest: every operation is walked, those whose handlers validate included.
    expect(all.map((c) => c.name)).toEqual(
      expect.arrayContaining(['sendChatMessage#0 text NUL', 'sendChatMessage#0 channel LONE_HIGH', 'queryMedia ?text NUL', 'createDelivery#0 body.content NUL', 'createDelivery#1 target.user_id LONE_LOW', 'createDelivery a key NUL']),
    );
    const ops = new Set(all.map((c) => c.name.split(/[# ]/)[0]));
    const withInput = (await contractApi()).getOperations().filter((op) => (op as Record<string, unknown>)['x-herald-outside-api'] !== true && (op.requestBody !== undefined || parameters(op).some((p) => p.in === 'query' && p.schema?.type === 'string')));
    expect([...ops].sort()).toEqual(withInput.map((op) => op.operationId).sort());
    expect(await problems(all)).toEqual([]);
  });

  it('a body nested thousands deep is a 400, not a 500: the check walks it without recursion or ever longer names', async () => {
    const bodies = ['['.repeat(30_000) + ']'.repeat(30_000), '{"a":'.repeat(10_000) + '"x\u0000"' + '}'.repeat(10_000)];
    for (const [path, token] of [['/mcp/pair/redeem', h.bridgeToken], ['/mcp/chat/messages', h.bridgeToken], ['/admin/archive/scrapes', h.adminToken]] as const) {
      for (const raw of bodies) {
        const res = await call(h.url, 'POST', path, { token, raw, headers: { 'content-type': 'application/json' } });
        expect([path, res.status]).toEqual([path, 400]);
        expect(((res.json as { error: string }).error).length).toBeLessThan(200);
      }
    }
  });

  it('a value its schema refuses, in any query parameter or body field: 400 naming it', async () => {
    const all = await refusedCases();
    expect(all.length).toBeGreaterThan(40);
    expect(await problems(all)).toEqual([]);
  });

  it('names the field the contract describes, not "unknown fields" (run_command with a short sourceMessageId)', async () => {
    const res = await h.bridge.post('/mcp/commands/run', { command: 'destinations list', userId: IDS.user, guildId: IDS.guild, channelId: IDS.channels.alerts, sourceMessageId: '1' });
    expect([res.status, res.json]).toEqual([400, { error: 'sourceMessageId must be a Discord id (decimal string)' }]);
    const unknown = await h.bridge.post('/mcp/commands/run', { command: 'destinations list', userId: IDS.user, guildId: IDS.guild, channelId: IDS.channels.alerts, sourceMessageID: IDS.user });
    expect(unknown.status).toBe(400);
    expect((unknown.json as { error: string }).error).toMatch(/^unknown field "sourceMessageID": the fields are command, userId, guildId, channelId, sourceMessageId, /);
    const missing = await h.bridge.get('/mcp/chat/messages');
    expect(missing.json).toEqual({ error: 'channel is required: a string of 1..100 characters' });
  });

  it('path parameters cannot carry U+0000 to the store: each has a pattern or a list, and answers as it says', async () => {
    const api = await contractApi();
    for (const op of api.getOperations()) {
      if ((op as Record<string, unknown>)['x-herald-outside-api'] === true) continue;
      for (const p of parameters(op).filter((p) => p.in === 'path')) {
        expect(typeof p.schema?.['pattern'] === 'string' || Array.isArray(p.schema?.['enum']), `${op.operationId} {${p.name}}`).toBe(true);
        const path = op.path.replace(`{${p.name}}`, '%00').replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(String(parameters(op).find((q) => q.name === name)?.example)));
        const res = await call(h.url, op.method.toUpperCase(), path, { token: path.startsWith('/admin/') ? h.adminToken : h.bridgeToken, ...(op.requestBody !== undefined ? { body: bodyOf(op)?.example } : {}) });
        const invalid = p['x-herald-invalid'];
        expect([op.operationId, res.status, ...(invalid ? [res.json] : [])]).toEqual([op.operationId, invalid?.status ?? 400, ...(invalid ? [{ error: invalid.error }] : [])]);
      }
    }
  });

  it('a delivery whose content holds U+0000 is refused naming the field (it was 202, and the NUL reached Discord), and nothing is stored; a malformed pairing code is `malformed request`', async () => {
    const requestId = newRequestId();
    const res = await h.bridge.post('/mcp/deliveries', { request_id: requestId, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts' }, body: { content: NUL } });
    expect([res.status, res.json]).toEqual([400, { error: 'body.content must not contain NUL (U+0000)' }]);
    expect((await h.bridge.get(`/mcp/deliveries/${requestId}`)).status).toBe(404);
    const surrogate = await h.bridge.post('/mcp/deliveries', { request_id: requestId, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts' }, body: { content: 'ok', card: { title: LONE_HIGH } } });
    expect([surrogate.status, surrogate.json]).toEqual([400, { error: 'body.card.title must not contain a lone surrogate (U+D800..U+DFFF without its pair)' }]);
    for (const code of [NUL, 'abcdefghjkmnpqrstvwxyz23456', 'A'.repeat(26), 42]) {
      const redeem = await h.bridge.post('/mcp/pair/redeem', { code });
      expect([redeem.status, redeem.text]).toEqual([400, '{"error":"malformed request"}']);
    }
  });
});
