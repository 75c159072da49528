import type { Operation } from 'openapi-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SchemaNode } from '../src/infra/contract/spec.js';
import { call, contractApi } from './support/client.js';
import { startTestHerald, type TestHerald } from './support/herald.js';

/**
 * Every number a caller gives Herald as text or as a JSON integer, on every operation the
 * contract has, is bounded by the contract: 2^63 (one past PostgreSQL's int8) is a 400 naming the
 * field, never a 500 from the store (`?after=9999999999999999999` and the ack ids were, on five
 * routes). The fields are found by walking the bundled contract, so one added later is covered:
 * a query parameter or body field (array items included) whose schema is an integer, or a string
 * whose pattern takes only digits.
 */

const TWO_63 = '9223372036854775808';
const INT8_MAX = '9223372036854775807';

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: SchemaNode;
  example?: unknown;
}

interface Field {
  name: string;
  method: string;
  path: string;
  /** Where it goes: a query parameter, or a body field's place (`ids[]`: the array's first item). */
  where: 'query' | 'body';
  place: string[];
  schema: SchemaNode;
  example?: Record<string, unknown>;
}

/** A string schema whose pattern takes digits only (it takes `1`, and refuses `1a` and `a`). */
function digitsOnly(schema: SchemaNode): boolean {
  if (schema.type !== 'string' || typeof schema['pattern'] !== 'string') return false;
  const re = new RegExp(schema['pattern'] as string, 'u');
  const takesDigits = ['1', '12345', '123456789012345678', INT8_MAX].some((s) => re.test(s));
  return takesDigits && !re.test('1a') && !re.test('a') && !re.test('-1');
}

/** An integer-ish schema: a JSON integer, or text of digits only. */
const numeric = (schema: SchemaNode): boolean => schema.type === 'integer' || digitsOnly(schema);

/**
 * An int8 cursor: text of digits that reaches past 18 digits (so it can hold an int8's 19) but
 * not past 19 (so it is no snowflake, which Herald keeps as text). 2^63 must be refused there,
 * and 2^63 - 1 taken.
 */
function int8Cursor(schema: SchemaNode): boolean {
  if (!digitsOnly(schema)) return false;
  const re = new RegExp(schema['pattern'] as string, 'u');
  return re.test('1'.repeat(19)) && !re.test('1'.repeat(20));
}

function parameters(op: Operation): Parameter[] {
  return (op.parameters ?? []) as unknown as Parameter[];
}

function bodyOf(op: Operation): { schema: SchemaNode; example: Record<string, unknown> } | undefined {
  const media = (op.requestBody as { content?: Record<string, { schema?: SchemaNode; example?: unknown; examples?: Record<string, { value: unknown }> }> } | undefined)?.content?.['application/json'];
  if (media?.schema === undefined) return undefined;
  const example = media.example ?? Object.values(media.examples ?? {})[0]?.value;
  return { schema: media.schema, example: structuredClone(example ?? {}) as Record<string, unknown> };
}

/** Every integer-ish field of a body's schema, with its place. */
function numericFields(schema: SchemaNode, place: string[] = []): { place: string[]; schema: SchemaNode }[] {
  if (numeric(schema)) return [{ place, schema }];
  if (schema.type === 'array' && schema.items !== undefined) return numericFields(schema.items, [...place.slice(0, -1), `${place.at(-1) ?? ''}[]`]);
  return Object.entries(schema.properties ?? {}).flatMap(([k, child]) => numericFields(child, [...place, k]));
}

function withValue(example: Record<string, unknown>, place: string[], value: unknown): Record<string, unknown> {
  const copy = structuredClone(example);
  let node: Record<string, unknown> = copy;
  for (const [i, key] of place.entries()) {
    const last = i === place.length - 1;
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

function baseline(op: Operation, query: Record<string, string> = {}): string {
  let path = op.path;
  for (const p of parameters(op).filter((p) => p.in === 'path')) path = path.replace(`{${p.name}}`, encodeURIComponent(String(p.example)));
  const q = new URLSearchParams();
  for (const p of parameters(op).filter((p) => p.in === 'query' && p.required === true && !(p.name in query))) q.set(p.name, String(p.example ?? 'x'));
  // A wait answers at once.
  if (parameters(op).some((p) => p.in === 'query' && p.name === 'timeout_ms') && !('timeout_ms' in query)) q.set('timeout_ms', '0');
  for (const [k, v] of Object.entries(query)) q.set(k, v);
  const s = q.toString();
  return s === '' ? path : `${path}?${s}`;
}

async function fields(): Promise<Field[]> {
  const api = await contractApi();
  const out: Field[] = [];
  for (const op of api.getOperations()) {
    if ((op as Record<string, unknown>)['x-herald-outside-api'] === true) continue;
    const method = op.method.toUpperCase();
    for (const p of parameters(op).filter((p) => p.in === 'query' && p.schema !== undefined && numeric(p.schema as SchemaNode))) {
      out.push({ name: `${op.operationId} ?${p.name}`, method, path: op.path, where: 'query', place: [p.name], schema: p.schema as SchemaNode });
    }
    const body = bodyOf(op);
    if (body === undefined) continue;
    for (const f of numericFields(body.schema)) out.push({ name: `${op.operationId} ${f.place.join('.')}`, method, path: op.path, where: 'body', place: f.place, schema: f.schema, example: body.example });
  }
  return out;
}

describe('numbers past int8 are refused by the contract, on every operation', () => {
  let h: TestHerald;
  let api: Awaited<ReturnType<typeof contractApi>>;
  beforeAll(async () => {
    h = await startTestHerald({ env: { HERALD_TRUSTED_BOT_IDS: '111111111111111112' } });
    api = await contractApi();
  });
  afterAll(() => h.close());

  const send = async (f: Field, value: string) => {
    const op = api.getOperations().find((o) => o.path === f.path && o.method.toUpperCase() === f.method) as Operation;
    const token = f.path.startsWith('/admin/') ? h.adminToken : h.bridgeToken;
    const top = (f.place[0] ?? '').replace(/\[\]$/, '');
    const path = f.where === 'query' ? baseline(op, { [top]: value }) : baseline(op);
    const body = f.where === 'body' ? withValue(f.example ?? {}, f.place, f.schema.type === 'integer' ? Number(value) : value) : bodyOf(op)?.example;
    // The client checks every answer against the contract: an undeclared 500 throws.
    return call(h.url, f.method, path, { token, ...(body !== undefined ? { body } : {}) });
  };

  it('2^63 in any integer-ish query parameter or body field: a 400 naming it (the inbox and handoff cursors and ack ids among them)', async () => {
    const all = await fields();
    const cursors = all.filter((f) => int8Cursor(f.schema)).map((f) => f.name);
    // The routes the review found, among the rest.
    expect(cursors).toEqual(expect.arrayContaining(['listInbox ?after', 'waitForInbox ?after', 'ackInbox cursor', 'listHandoffs ?after', 'waitForHandoff ?after', 'ackHandoffs ids[]']));
    const problems: string[] = [];
    for (const f of all) {
      const res = await send(f, TWO_63).catch((err: unknown) => ({ status: 0, text: JSON.stringify((err as { actual?: unknown }).actual ?? String(err)), json: undefined }));
      const top = (f.place[0] ?? '').replace(/\[\]$/, '');
      const error = String((res.json as { error?: unknown } | undefined)?.error);
      const named = new RegExp(`(^|[^A-Za-z_])${top}([^A-Za-z_]|$)`).test(error);
      // A snowflake is text to Herald: 2^63 may be a valid one (answered as any other); a cursor or an integer is refused.
      const mustRefuse = f.schema.type === 'integer' || int8Cursor(f.schema);
      if (res.status >= 500 || res.status === 0 || (mustRefuse && !(res.status === 400 && named))) problems.push(`${f.name}: ${res.status} ${res.text.slice(0, 160)}`);
    }
    expect(problems).toEqual([]);
  });

  it('2^63 - 1 is still a cursor the contract takes: no 400 from the pattern, no 500 from the store', async () => {
    const all = (await fields()).filter((f) => int8Cursor(f.schema));
    expect(all.length).toBeGreaterThanOrEqual(6);
    for (const f of all) {
      const res = await send(f, INT8_MAX);
      expect([f.name, res.status < 500]).toEqual([f.name, true]);
      const error = String((res.json as { error?: unknown } | undefined)?.error);
      expect([f.name, error]).not.toEqual([f.name, expect.stringContaining('9223372036854775807)')]);
    }
  });
});
