import { readFileSync, readdirSync } from 'node:fs';
import { OpenAPIBackend, type Operation } from 'openapi-backend';
import { describe, expect, it, vi } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parse } from 'yaml';
import { withUtf16Lengths } from '../src/infra/contract/ajv.js';
import { SPEC_PATH, SPEC_YAML_PATH } from '../src/infra/contract/spec.js';
import { startTestHerald } from './support/herald.js';
import { contractApi } from './support/client.js';

/** Every value under `node` with its JSON pointer, depth first. */
function* nodes(node: unknown, pointer = ''): Generator<[string, unknown]> {
  yield [pointer, node];
  if (typeof node !== 'object' || node === null) return;
  for (const [key, value] of Object.entries(node)) yield* nodes(value, `${pointer}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`);
}

/** The `x-herald-*` extensions under `node`, as `key: value` strings. */
function heraldExtensions(node: unknown): string[] {
  const found: string[] = [];
  for (const [, value] of nodes(node)) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) continue;
    for (const [key, v] of Object.entries(value)) if (key.startsWith('x-herald-')) found.push(`${key}: ${JSON.stringify(v)}`);
  }
  return found.sort();
}

interface Example {
  example?: unknown;
  examples?: Record<string, { value: unknown }>;
}

/** A parameter's or body's example from the contract (every path parameter and body has one). */
function exampleOf(node: Example | undefined): unknown {
  return node?.example ?? Object.values(node?.examples ?? {})[0]?.value;
}

/**
 * A request the contract calls valid for `op`: its path with every parameter's example, its
 * required query parameters (and waitForHandoff's timeout_ms=0, not to wait), its body's example.
 */
function validRequest(op: Operation): { path: string; query: string; body: unknown } {
  const parameters = (op.parameters ?? []) as (Example & { in: string; name: string; required?: boolean })[];
  let path = op.path;
  const query = new URLSearchParams();
  for (const p of parameters) {
    if (p.in === 'path') path = path.replace(`{${p.name}}`, encodeURIComponent(String(exampleOf(p))));
    if (p.in === 'query' && p.required === true) query.set(p.name, String(exampleOf(p)));
  }
  // A long poll (waitForInbox, waitForHandoff, …) answers at once with nothing to wait for, not after its default 30 s.
  if (parameters.some((p) => p.in === 'query' && p.name === 'timeout_ms')) query.set('timeout_ms', '0');
  if (path.includes('{')) throw new Error(`${op.operationId}: no example for a parameter of ${path}`);
  const content = (op.requestBody as { content?: Record<string, Example> } | undefined)?.content?.['application/json'];
  return { path, query: query.size > 0 ? `?${query}` : '', body: content === undefined ? undefined : exampleOf(content) };
}

describe('the contract', () => {
  const bundle = JSON.parse(readFileSync(SPEC_PATH, 'utf8')) as { paths: Record<string, Record<string, { operationId?: string }>> };

  it('is bundled from openapi/ with local $refs only, every one resolving in the bundle', () => {
    const at = new Map(nodes(bundle));
    const refs = [...at].flatMap(([pointer, value]) => (pointer.endsWith('/$ref') ? [[pointer, value] as const] : []));
    expect(refs.length).toBeGreaterThan(100);
    for (const [pointer, ref] of refs) {
      expect(ref, pointer).toMatch(/^#\/components\//);
      expect(at.has((ref as string).slice(1)), `${pointer}: ${String(ref)}`).toBe(true);
    }
  });

  it('keeps every x-herald-* extension of the parts, and serves the same document as YAML', () => {
    const parts = readdirSync('openapi').filter((f) => f.endsWith('.yaml')).map((f) => parse(readFileSync(`openapi/${f}`, 'utf8')) as unknown);
    expect(heraldExtensions(bundle)).toEqual(parts.flatMap(heraldExtensions).sort());
    expect(parse(readFileSync(SPEC_YAML_PATH, 'utf8'))).toEqual(bundle);
  });

  it('has an example for every request body and path parameter, and every example is valid by its schema', () => {
    const ajv = withUtf16Lengths(new Ajv2020({ strict: false, allErrors: true }));
    // Schemas refer to the bundle's components: resolve them against the bundle itself.
    ajv.addSchema({ $id: 'herald', components: (bundle as unknown as { components: unknown }).components });
    const rebased = (node: unknown): unknown =>
      JSON.parse(JSON.stringify(node), (key, value: unknown) => (key === '$ref' && typeof value === 'string' ? `herald${value}` : value));
    const examples: { where: string; schema: unknown; value: unknown }[] = [];
    const missing: string[] = [];
    for (const [pointer, node] of nodes(bundle)) {
      if (typeof node !== 'object' || node === null || !('schema' in node)) continue;
      const holder = node as { schema: unknown; example?: unknown; examples?: Record<string, { value: unknown }> };
      if ('example' in holder) examples.push({ where: `${pointer}/example`, schema: holder.schema, value: holder.example });
      for (const [name, ex] of Object.entries(holder.examples ?? {})) examples.push({ where: `${pointer}/examples/${name}`, schema: holder.schema, value: ex.value });
      const isRequestBody = /\/requestBody\/content\/[^/]+$/.test(pointer);
      const isPathParameter = (node as { in?: unknown }).in === 'path';
      if ((isRequestBody || isPathParameter) && !('example' in holder) && holder.examples === undefined) missing.push(pointer);
    }
    expect(missing, 'request bodies and path parameters without an example (Swagger UI would send "string")').toEqual([]);
    expect(examples.length).toBeGreaterThan(20);
    for (const { where, schema, value } of examples) {
      const validate = ajv.compile(rebased(schema) as object);
      expect(validate(value) ? [] : validate.errors, where).toEqual([]);
    }
    // The delivery examples Swagger UI offers: a post with a card and a link, a DM, an edit, a reaction and a delete.
    const deliveries = (bundle.paths['/mcp/deliveries'] as unknown as { post: { requestBody: { content: Record<string, { examples: Record<string, { value: { kind: string; body: Record<string, unknown> } }> }> } } }).post;
    const offered = Object.values(deliveries.requestBody.content['application/json']?.examples ?? {}).map((e) => e.value);
    expect(offered.map((v) => v.kind)).toEqual(['post', 'dm', 'edit', 'reaction', 'delete']);
    expect(Object.keys(offered[0]?.body ?? {})).toEqual(['content', 'card', 'links']);
  });

  it('lists no /metrics (it is on the metrics port, not the API\'s) and says where it is', () => {
    expect(Object.keys(bundle.paths).filter((p) => p.includes('metrics'))).toEqual([]);
    const info = (bundle as unknown as { info: { description: string } }).info.description;
    expect(info).toContain('`GET /metrics`');
    expect(info).toContain('HERALD_METRICS_PORT');
  });

  it('routes every operation of the bundle (openapi-backend fails silently on a bad 3.1 document)', async () => {
    const raw = bundle;
    const declared = Object.values(raw.paths).flatMap((item) => Object.values(item).flatMap((op) => (op.operationId ? [op.operationId] : [])));
    expect(declared.length).toBeGreaterThanOrEqual(11);
    const api = await contractApi();
    expect(api.getOperations().map((o) => o.operationId).sort()).toEqual([...declared].sort());
  });

  it('binds a handler to every operationId in the running app: a valid request reaches it, and it answers a status it declares', { timeout: 120_000 }, async () => {
    // Record which registered handler answers each request: the operation's own, or one of
    // openapi-backend's fallbacks (validationFail, notFound, unauthorizedHandler, ...). A request
    // that stops at validation or routing never reaches the operation's handler.
    const reached: string[] = [];
    const register = OpenAPIBackend.prototype.register as (this: OpenAPIBackend, id: string, handler: (...args: unknown[]) => unknown) => void;
    const spy = vi.spyOn(OpenAPIBackend.prototype, 'register').mockImplementation(function (this: OpenAPIBackend, ...args: unknown[]) {
      const [id, handler] = args as [string, (...a: unknown[]) => unknown];
      return register.call(this, id, (...a: unknown[]) => {
        reached.push(id);
        return handler(...a);
      });
    });
    const h = await startTestHerald().finally(() => spy.mockRestore());
    try {
      const api = await contractApi();
      const problems: string[] = [];
      const operations = api.getOperations();
      expect(operations.length).toBeGreaterThanOrEqual(30);
      for (const op of operations) {
        const id = op.operationId ?? '';
        const { path, query, body } = validRequest(op);
        const token = path.startsWith('/admin/') ? h.adminToken : h.bridgeToken;
        reached.length = 0;
        const res = await fetch(`${h.url}${path}${query}`, { method: op.method.toUpperCase(), headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
        const what = `${id} ${op.method.toUpperCase()} ${path}${query}: ${res.status}`;
        if (!Object.keys(op.responses ?? {}).includes(String(res.status))) problems.push(`${what}, a status it does not declare`);
        if ((op as Record<string, unknown>)['x-herald-outside-api'] === true) {
          // Served by a plain route (an event stream, a file): its own answer, not the API's 404.
          const answer = id === 'streamArchiveEvents' ? res.headers.get('content-type') : await res.text();
          // An upload with no filename and no file is refused by the upload route itself.
          const own = id === 'streamArchiveEvents' ? 'text/event-stream' : id === 'uploadFile' ? JSON.stringify({ error: 'filename is required: the filename query parameter or the X-Herald-Filename header' }) : JSON.stringify({ error: 'file not found' });
          if (answer !== own) problems.push(`${what}, not its route's answer (${String(answer)})`);
        } else if (!reached.includes(id)) {
          problems.push(`${what}, answered by ${reached.join(', ') || 'no handler'} instead of its own`);
        }
        if (!res.bodyUsed) await res.body?.cancel();
      }
      expect(problems).toEqual([]);
    } finally {
      await h.close();
    }
  });
});
