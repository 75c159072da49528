import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parse } from 'yaml';
import { withUtf16Lengths } from '../src/platform/contract/ajv.js';
import { SPEC_PATH, SPEC_YAML_PATH } from '../src/platform/contract/spec.js';
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
    // The delivery examples Swagger UI offers: a post with a card and a link, a DM and an edit.
    const deliveries = (bundle.paths['/mcp/deliveries'] as unknown as { post: { requestBody: { content: Record<string, { examples: Record<string, { value: { kind: string; body: Record<string, unknown> } }> }> } } }).post;
    const offered = Object.values(deliveries.requestBody.content['application/json']?.examples ?? {}).map((e) => e.value);
    expect(offered.map((v) => v.kind)).toEqual(['post', 'dm', 'edit']);
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

  it('binds a handler to every operationId in the running app, each answering a status it declares', async () => {
    const h = await startTestHerald();
    try {
      const api = await contractApi();
      const undeclared: string[] = [];
      for (const op of api.getOperations()) {
        // Unauthenticated calls reach the auth check; authenticated ones reach a handler. Any
        // operation without a handler would answer 501 from openapi-backend's notImplemented
        // or throw (strict mode); one the API's port does not serve would answer 404 (what a
        // fuzzer reading the contract found for /metrics): none may happen.
        const path = op.path.replace('{request_id}', 'a'.repeat(64)).replace('{user_id}', '123456789012345678').replace('{guild_id}', '234567890123456789').replace('{destination}', 'alerts');
        const token = path.startsWith('/admin/') ? h.adminToken : h.bridgeToken;
        const query = op.operationId === 'waitForHandoff' ? '?timeout_ms=0' : '';
        const res = await fetch(`${h.url}${path}${query}`, { method: op.method.toUpperCase(), headers: { authorization: `Bearer ${token}` }, ...(op.requestBody ? { body: '{}' } : {}) });
        await res.body?.cancel();
        if (!Object.keys(op.responses ?? {}).includes(String(res.status))) undeclared.push(`${op.operationId} ${op.method.toUpperCase()} ${path}: ${res.status}`);
      }
      expect(undeclared).toEqual([]);
    } finally {
      await h.close();
    }
  });
});
