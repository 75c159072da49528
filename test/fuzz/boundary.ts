import { createHash } from 'node:crypto';
import { parse } from 'yaml';
import { specDocument } from '../../src/infra/contract/spec.js';
import { unstorable } from '../../src/infra/contract/storable.js';
import { answerProblems } from '../support/client.js';
import { asText, boundaries, sampleOf, validAsText, validBy, type Boundary, type Schema, type Value } from './boundary-values.js';
import { exitedWithin, observe, send, statusClass, type Answer, type Life, type StatusClass } from './campaign.js';
import type { Auth, FuzzRequest } from './arbitraries.js';

/**
 * The boundary pass over Herald's HTTP API: every operation of the contract the running Herald
 * serves (`/openapi.yaml`: the bundle with the modules' own documents merged in), every path,
 * query, header and body field of it, each boundary value of that field's schema
 * (test/fuzz/boundary-values.ts) put in alone, the rest of the request as the contract's example
 * has it. Never a 5xx, never a hang, an answer the contract describes, a value the contract
 * refuses refused with a 400 naming the field (or the status its `x-herald-invalid` says), and
 * nothing written on a 4xx.
 */

export type BoundaryKind = 'crash' | '5xx' | 'timeout' | 'connection' | 'contract' | 'validity' | 'unnamed' | 'write-on-refusal';

export interface BoundaryViolation {
  kind: BoundaryKind;
  /** operationId or tool name. */
  where: string;
  field: string;
  label: string;
  detail: string;
}

export interface BoundaryTally {
  requests: number;
  /** Time spent on them, checks included. */
  ms: number;
  byClass: Record<StatusClass, number>;
}

export interface BoundaryReport {
  /** Requests (or tool calls) per operationId / tool. */
  by: Record<string, BoundaryTally>;
  skipped: string[];
  violations: BoundaryViolation[];
  durationMs: number;
}

type Where = 'path' | 'query' | 'header' | 'body';

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: Schema;
  example?: unknown;
  'x-herald-invalid'?: { status: number; error?: string };
}

export interface Field {
  where: Where;
  /** A parameter's name, or a body field's place (a number: an array's item). */
  place: (string | number)[];
  schema: Schema;
  sample: unknown;
  /** Body fields: the whole body to put the value in (the example, with the field's parents filled in). */
  base?: unknown;
  invalidStatus?: number | undefined;
}

interface Operation {
  id: string;
  method: string;
  path: string;
  auth: Auth;
  params: Parameter[];
  /** JSON bodies to start from (the contract's examples), or a raw one. */
  bodies: Record<string, unknown>[];
  bodySchema: Schema;
  /** It declares a 404: a path naming nothing may be answered so. */
  notFound: boolean;
  /** What the operation answers any invalid body with, when the protocol fixes it (`x-herald-invalid-body`). */
  invalidBody?: { status: number; error?: string };
  rawBody?: string;
}

/** A field's name as an error message says it: its last key (`target.user_id` → `user_id`). */
export const fieldName = (place: readonly (string | number)[]): string => String([...place].reverse().find((p) => typeof p === 'string') ?? '');

/**
 * The boundaries the short form keeps: the pattern's largest number and the ones past it (the
 * 19-digit cursors that were 500s), 2^63, one past maxLength, maxItems and maximum, NUL, a lone
 * surrogate, an enum member in upper case.
 */
export const SHORT = /^(largest number|one past it|2\^63 |maxLength \+ 1 \(|maxItems \+ 1|maximum \+ 1|NUL after|a lone high|enum .* upper case)/;

export const fieldLabel = (place: readonly (string | number)[]): string => place.map((p) => (typeof p === 'number' ? '[]' : p)).join('.').replace(/\.\[\]/g, '[]');

/** The operations of a served contract, each with a request valid by it to start from. */
export function operationsOf(document: Record<string, unknown>, skipped: string[]): Operation[] {
  const doc = specDocument(document) as { paths: Record<string, Record<string, unknown>> };
  const out: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    const shared = (item['parameters'] ?? []) as Parameter[];
    for (const [method, raw] of Object.entries(item)) {
      if (!['get', 'put', 'post', 'delete', 'patch'].includes(method)) continue;
      const op = raw as { operationId: string; 'x-herald-invalid-body'?: { status: number; error?: string }; parameters?: Parameter[]; security?: Record<string, unknown>[]; requestBody?: { content?: Record<string, { schema?: Schema; example?: unknown; examples?: Record<string, { value: unknown }> }> }; responses?: Record<string, { content?: Record<string, unknown> }> };
      // An event stream answers only when it ends: nothing to judge in one request.
      if (Object.values(op.responses ?? {}).some((r) => r.content?.['text/event-stream'] !== undefined)) {
        skipped.push(`${op.operationId} (an event stream)`);
        continue;
      }
      const schemes = (op.security ?? []).flatMap((s) => Object.keys(s));
      const auth: Auth = schemes.includes('adminToken') ? 'admin' : schemes.includes('bridgeToken') || path.startsWith('/mcp/') ? 'bridge' : 'none';
      const media = op.requestBody?.content?.['application/json'];
      const bodies: Record<string, unknown>[] = [];
      if (media !== undefined) {
        const examples = media.example !== undefined ? [media.example] : Object.values(media.examples ?? {}).map((e) => e.value);
        bodies.push(...(examples.length > 0 ? examples : [sampleOf(media.schema ?? {})]).map((e) => structuredClone(e) as Record<string, unknown>));
      }
      const rawBody = op.requestBody !== undefined && media === undefined ? 'boundary pass' : undefined;
      const invalidBody = op['x-herald-invalid-body'];
      out.push({ id: op.operationId, method: method.toUpperCase(), path, auth, params: [...(op.parameters ?? []), ...shared], bodies, bodySchema: media?.schema ?? {}, notFound: op.responses?.['404'] !== undefined, ...(invalidBody !== undefined ? { invalidBody } : {}), ...(rawBody !== undefined ? { rawBody } : {}) });
    }
  }
  return out;
}

/** A `oneOf`/`anyOf` schema's branch a value is valid by (else its first), and `allOf` merged. */
function branchOf(schema: Schema, value: unknown): Schema {
  for (const key of ['oneOf', 'anyOf'] as const) {
    const branches = schema[key];
    if (Array.isArray(branches) && branches.length > 0) {
      const rest = { ...schema, [key]: undefined };
      const chosen = (branches as Schema[]).find((b) => validBy(b, { json: value })) ?? (branches[0] as Schema);
      return branchOf({ ...rest, ...chosen, properties: { ...((rest['properties'] as object | undefined) ?? {}), ...((chosen['properties'] as object | undefined) ?? {}) } }, value);
    }
  }
  if (Array.isArray(schema['allOf'])) {
    const parts = schema['allOf'] as Schema[];
    return branchOf({ ...schema, allOf: undefined, properties: Object.assign({}, schema['properties'], ...parts.map((p) => p['properties'] ?? {})) }, value);
  }
  return schema;
}

/** Every field of a body (or a tool's arguments): each property, nested objects' and an array's first item's too. */
export function bodyFields(schema: Schema, sample: unknown, place: (string | number)[] = [], base: unknown = sample): Field[] {
  const s = branchOf(schema, sample);
  const out: Field[] = [];
  const properties = s['properties'] as Record<string, Schema> | undefined;
  if (properties !== undefined && (sample === undefined || (typeof sample === 'object' && sample !== null && !Array.isArray(sample)))) {
    for (const [key, child] of Object.entries(properties)) {
      if (child === undefined) continue;
      const given = (sample as Record<string, unknown> | undefined)?.[key];
      const childSample = given ?? sampleOf(child);
      // A field the example leaves out goes in beside the example's own (a required sibling it needs included).
      const childBase = given === undefined ? withAt(base, [...place, key], childSample) : base;
      const resolved = branchOf(child, childSample);
      if (resolved['properties'] !== undefined) out.push(...bodyFields(child, childSample, [...place, key], childBase));
      else {
        out.push({ where: 'body', place: [...place, key], schema: child, sample: childSample, base: childBase });
        const items = resolved['items'] as Schema | undefined;
        if (items !== undefined) {
          const item = Array.isArray(childSample) && childSample.length > 0 ? childSample[0] : sampleOf(items);
          const itemBase = withAt(childBase, [...place, key, 0], item);
          const itemSchema = branchOf(items, item);
          if (itemSchema['properties'] !== undefined) out.push(...bodyFields(items, item, [...place, key, 0], itemBase));
          else out.push({ where: 'body', place: [...place, key, 0], schema: items, sample: item, base: itemBase });
        }
      }
    }
  }
  return out;
}

/** A copy of `root` with `value` at `place` (an array's item: the array holding just it). */
export function withAt(root: unknown, place: readonly (string | number)[], value: unknown): unknown {
  if (place.length === 0) return value;
  const [head, ...rest] = place as [string | number, ...(string | number)[]];
  if (typeof head === 'number') {
    const list = Array.isArray(root) ? root : [];
    return [withAt(list[0], rest, value)];
  }
  const node = typeof root === 'object' && root !== null && !Array.isArray(root) ? { ...(root as Record<string, unknown>) } : {};
  node[head] = withAt(node[head], rest, value);
  return node;
}

const LITERAL = '\u0001boundary-literal\u0001';

/** JSON text of a body with `value` at `place`; a number's literal written as is. */
export function bodyText(root: unknown, place: readonly (string | number)[], value: Value): string {
  if ('json' in value) return JSON.stringify(withAt(root, place, value.json));
  return JSON.stringify(withAt(root, place, LITERAL)).replace(JSON.stringify(LITERAL), value.literal);
}

/** A path segment or query value, percent-encoded; a lone surrogate as the bytes its UTF-8-like encoding would take (no UTF-8 can). */
export function encode(text: string): string {
  let out = '';
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (code >= 0xd800 && code <= 0xdfff) out += `%${(0xe0 | (code >> 12)).toString(16)}%${(0x80 | ((code >> 6) & 0x3f)).toString(16)}%${(0x80 | (code & 0x3f)).toString(16)}`.toUpperCase();
    else out += encodeURIComponent(ch);
  }
  return out;
}

/** A query parameter's or path parameter's valid starting value: its example, or one built from its schema; a wait's 0. */
function paramSample(p: Parameter): string {
  if (/timeout/i.test(p.name)) return '0';
  const v = p.example ?? sampleOf(p.schema ?? {});
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** The fields of an operation, each with what it is to be. */
function fieldsOf(op: Operation): Field[] {
  const out: Field[] = [];
  for (const p of op.params) {
    if (p.schema === undefined || !['path', 'query', 'header'].includes(p.in)) continue;
    out.push({ where: p.in as Where, place: [p.name], schema: p.schema, sample: paramSample(p), invalidStatus: p['x-herald-invalid']?.status });
  }
  const seen = new Set<string>();
  for (const body of op.bodies) {
    for (const f of bodyFields(op.bodySchema, body)) {
      const key = fieldLabel(f.place);
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(f);
    }
  }
  return out;
}

/** The request: the operation's starting one, with `value` in `field` (none: the starting one itself). */
function requestFor(op: Operation, body: Record<string, unknown> | undefined, field?: Field, value?: Value): FuzzRequest {
  let path = op.path;
  const query = new URLSearchParams();
  const headers: Record<string, string> = {};
  const given = (p: Parameter): string | undefined => (field !== undefined && value !== undefined && field.where === p.in && field.place[0] === p.name ? asText(value) : undefined);
  for (const p of op.params) {
    const v = given(p);
    if (p.in === 'path') path = path.replace(`{${p.name}}`, encode(v ?? paramSample(p)));
    else if (p.in === 'query' && (v !== undefined || p.required === true || /timeout/i.test(p.name))) query.append(p.name, v ?? paramSample(p));
    else if (p.in === 'header' && v !== undefined) headers[p.name] = /^[\t\x20-\x7e]*$/.test(v) ? v : encode(v);
  }
  const q = [...query].map(([k, v]) => `${encode(k)}=${encode(v)}`).join('&');
  let text: string | undefined;
  if (op.rawBody !== undefined) text = op.rawBody;
  else if (body !== undefined) {
    const fresh = freshKeys(field?.where === 'body' && field.base !== undefined ? field.base : body, field);
    text = field?.where === 'body' && value !== undefined ? bodyText(fresh, field.place, value) : JSON.stringify(fresh);
  }
  if (text !== undefined) headers['content-type'] = op.rawBody !== undefined ? 'application/octet-stream' : 'application/json';
  // Without a name the upload is refused before its bytes are read: the starting request names it.
  if (op.rawBody !== undefined && !query.has('filename') && headers['X-Herald-Filename'] === undefined) headers['X-Herald-Filename'] = 'boundary.txt';
  return { category: op.id, server: 'herald', method: op.method, path: q === '' ? path : `${path}?${q}`, auth: op.auth, headers, ...(text !== undefined ? { body: text } : {}) };
}

let keys = 0;

/**
 * The body with a new idempotency key (a top-level `request_id` or `idempotencyKey` of 64 hex
 * digits), unless it is the field under test: a key used before answers with what it stored.
 */
function freshKeys(body: unknown, field: Field | undefined): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const copy = { ...(body as Record<string, unknown>) };
  for (const key of ['request_id', 'idempotencyKey']) {
    if (typeof copy[key] !== 'string' || !/^[0-9a-f]{64}$/.test(copy[key]) || (field?.where === 'body' && field.place[0] === key)) continue;
    copy[key] = createHash('sha256').update(`boundary ${++keys}`).digest('hex');
  }
  return copy;
}

/** How long a request may take: a wait's own timeout past the usual limit. */
function limitFor(field: Field | undefined, value: Value | undefined, timeoutMs: number): number {
  if (field === undefined || value === undefined || !/timeout/i.test(fieldName(field.place))) return timeoutMs;
  const n = Number(asText(value));
  if (!Number.isFinite(n) || n < 0) return timeoutMs;
  const ms = /seconds/i.test(fieldName(field.place)) ? n * 1000 : n;
  return Math.min(timeoutMs + ms, timeoutMs + 120_000);
}

export interface HttpPassOptions {
  timeoutMs?: number;
  /** The smoke test's short form: only the boundaries SHORT names, not all. */
  short?: boolean;
  /** Only the operations (operationIds) and tools (`tool <name>`) this says yes to; default all. */
  only?: (name: string) => boolean;
  log?: (line: string) => void;
}

/** Run the HTTP half of the boundary pass against a running Herald. */
export async function httpBoundaryPass(life: () => Life, restart: () => Promise<boolean>, report: BoundaryReport, options: HttpPassOptions = {}): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const log = options.log ?? (() => undefined);
  const served = await send(life().target, { category: 'contract', server: 'herald', method: 'GET', path: '/openapi.yaml', auth: 'none', headers: {} }, undefined, timeoutMs);
  const document = parse(served.text) as Record<string, unknown>;
  const ops = operationsOf(document, report.skipped).filter((op) => options.only?.(op.id) ?? true);
  log(`boundary pass: ${ops.length} operations of the served contract`);
  const startings = new Map<string, string>();
  for (const op of ops) {
    const began = Date.now();
    const tally = (report.by[op.id] ??= { requests: 0, ms: 0, byClass: { '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, timeout: 0, error: 0 } });
    const body = op.bodies[0];
    const cases: [Field | undefined, Boundary | undefined][] = [[undefined, undefined]];
    for (const field of fieldsOf(op)) for (const b of boundaries(field.schema, field.sample)) if (options.short !== true || SHORT.test(b.label)) cases.push([field, b]);
    for (const [field, b] of cases) {
      const request = requestFor(op, body, field, b?.value);
      const name = field === undefined ? '(the starting request)' : `${field.where} ${fieldLabel(field.place)}`;
      const violate = (kind: BoundaryKind, detail: string): void => {
        report.violations.push({ kind, where: op.id, field: name, label: b?.label ?? '', detail });
        log(`  ✗ ${kind} ${op.method} ${op.path} ${name} = ${b?.label ?? ''}: ${detail.slice(0, 300)}`);
      };
      const watch = await observe(life(), request).catch(() => undefined);
      const answer: Answer | Error = await send(life().target, request, life().agents, limitFor(field, b?.value, timeoutMs)).catch((err: unknown) => err as Error);
      tally.requests += 1;
      tally.byClass[statusClass(answer)] += 1;
      if (await exitedWithin(life().target, answer instanceof Error ? 500 : 0)) {
        violate('crash', `herald exited; its last output:\n${life().target.proc.output().trim().split('\n').slice(-8).join('\n')}`);
        if (!(await restart())) return;
        continue;
      }
      if (answer instanceof Error) {
        violate(statusClass(answer) === 'timeout' ? 'timeout' : 'connection', answer.message);
        continue;
      }
      if (answer.status >= 500) violate('5xx', `${answer.status} ${answer.text.slice(0, 300)}`);
      const pathname = request.path.split('?')[0] ?? '';
      for (const problem of await answerProblems(request.method, pathname, answer.status, answer.contentType, answer.text)) violate('contract', problem);
      if (answer.status >= 400 && answer.status < 500 && watch !== undefined) for (const problem of await watch.changes()) violate('write-on-refusal', problem);
      if (field === undefined || b === undefined) {
        if (answer.status === 400) log(`  (${op.id}: the starting request answered 400 ${answer.text.slice(0, 200)})`);
        continue;
      }
      // The field at its own sample: what the rest of the request answers (an attachment's file no one uploaded: a 400 of its own).
      const key = `${op.id} ${JSON.stringify(field.base ?? null)}`;
      let starting = startings.get(key);
      if (starting === undefined) {
        starting = await send(life().target, requestFor(op, body, field, { json: field.sample }), life().agents, timeoutMs).then((a) => a.text, () => '');
        startings.set(key, starting);
      }
      judge(op, field, b, answer, starting, violate);
    }
    tally.ms += Date.now() - began;
  }
}

/** A value the contract refuses: refused, with the status the contract names, the field named. */
function judge(op: Operation, field: Field, b: Boundary, answer: Answer, starting: string, violate: (kind: BoundaryKind, detail: string) => void): void {
  // A URL or a header cannot carry a lone surrogate: its bytes (sent as UTF-8 would write it) are read as U+FFFD.
  const text = field.where === 'body' ? asText(b.value) : asText(b.value).replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
  // The one input gate (src/infra/contract/storable.ts) reads query and body; a path or header only its pattern.
  const storable = field.where === 'path' || field.where === 'header' || unstorable(text) === undefined;
  const valid = storable && (field.where === 'body' ? validBy(field.schema, b.value) : validAsText(field.schema, text));
  if (valid) return;
  if (answer.status < 400) {
    violate('validity', `a value the contract refuses was answered ${answer.status}: ${answer.text.slice(0, 200)}`);
    return;
  }
  if (field.invalidStatus !== undefined && answer.status === field.invalidStatus) return;
  if (field.where === 'body' && op.invalidBody !== undefined && answer.status === op.invalidBody.status && (op.invalidBody.error === undefined || answer.text === JSON.stringify({ error: op.invalidBody.error }))) return;
  // A path naming nothing: not found (an empty segment is another path: no operation's, or another method's).
  if (field.where === 'path' && (answer.status === 404 ? op.notFound || text === '' : answer.status === 405 && text === '')) return;
  // The rest of the request is refused on its own (state, not shape): the same answer says nothing of this field.
  if (answer.text === starting && answer.status === 400) return;
  // A header is named as what it carries (`X-Herald-Filename`: the filename).
  const name = field.where === 'header' ? (fieldName(field.place).split('-').at(-1) ?? '') : fieldName(field.place);
  if (answer.status === 400 && !new RegExp(`(^|[^A-Za-z0-9_])${name.replace(/[-]/g, '\\-')}([^A-Za-z0-9_]|$)`, 'i').test(answer.text)) violate('unnamed', `400 without naming ${name}: ${answer.text.slice(0, 200)}`);
  if (answer.status !== 400 && answer.status !== 413) violate('validity', `a value the contract refuses answered ${answer.status}, not 400${field.invalidStatus !== undefined ? ` or ${field.invalidStatus}` : ''}: ${answer.text.slice(0, 200)}`);
}
