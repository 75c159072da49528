import fc from 'fast-check';
import { CATEGORY_GROUPS, type CategoryGroup } from './groups.js';
import { loadSpec } from '../../src/infra/contract/spec.js';
import { SANDBOX_IDS } from '../../src/platforms/discord/sandbox/ids.js';

/**
 * fast-check arbitraries for the fuzz campaign: requests built from the contract's own schemas
 * (openapi/herald.yaml), valid ones and hostile ones, plus requests to the sandbox.
 */

export type Auth = 'bridge' | 'admin' | 'none' | 'wrong' | 'malformed';

export interface FuzzRequest {
  /** Where the request goes and what kind it is, for the summary. */
  category: string;
  server: 'herald' | 'sandbox' | 'gateway';
  method: string;
  /** Path and query, already percent-encoded where needed (sent as is). */
  path: string;
  auth: Auth;
  headers: Record<string, string>;
  /** The body as sent; `oversize` is expanded to that many bytes at send time. */
  body?: string | { oversize: number };
  /** Gateway only: the frames sent after HELLO. */
  frames?: string[];
}

type Schema = Record<string, unknown>;

const spec = loadSpec().document as { components: { schemas: Record<string, Schema> } };
const schemas = spec.components.schemas;

function resolve(schema: Schema): Schema {
  const ref = schema['$ref'];
  if (typeof ref !== 'string') return schema;
  const found = schemas[ref.replace('#/components/schemas/', '')];
  if (found === undefined) throw new Error(`unknown $ref ${ref}`);
  return resolve(found);
}

/** Strings: ASCII mostly, unicode and astral often, lengths near the declared bounds. */
function stringArb(min: number, max: number): fc.Arbitrary<string> {
  const cap = Math.min(max, 64);
  const lo = Math.min(min, cap);
  return fc.oneof(
    { weight: 6, arbitrary: fc.string({ minLength: lo, maxLength: cap }) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: lo, maxLength: cap }).filter((s) => s.length >= min && s.length <= max) },
    // The bounds themselves, in UTF-16 code units (an emoji is two).
    { weight: 1, arbitrary: fc.constantFrom('x'.repeat(max), 'x'.repeat(Math.max(min, 0)) || 'x', max >= 2 ? '😀'.repeat(Math.floor(max / 2)) : 'x') },
  );
}

/** A value valid by a contract schema (the subset of JSON Schema the contract uses). */
export function valid(schemaOrRef: Schema): fc.Arbitrary<unknown> {
  const schema = resolve(schemaOrRef);
  if ('const' in schema) return fc.constant(schema['const']);
  if (Array.isArray(schema['enum'])) return fc.constantFrom(...(schema['enum'] as unknown[]));
  if (Array.isArray(schema['oneOf'])) return fc.oneof(...(schema['oneOf'] as Schema[]).map((s) => valid(s)));
  switch (schema['type']) {
    case 'string': {
      const pattern = schema['pattern'];
      if (typeof pattern === 'string') {
        const max = typeof schema['maxLength'] === 'number' ? schema['maxLength'] : Infinity;
        return fc.stringMatching(new RegExp(pattern)).filter((s) => s.length <= max);
      }
      return stringArb(Number(schema['minLength'] ?? 0), Number(schema['maxLength'] ?? 64));
    }
    case 'integer':
      return fc.integer({ min: Number(schema['minimum'] ?? -(2 ** 31)), max: Number(schema['maximum'] ?? 2 ** 31 - 1) });
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(valid(schema['items'] as Schema), { maxLength: Math.min(Number(schema['maxItems'] ?? 5), 5) });
    case 'object': {
      const properties = (schema['properties'] ?? {}) as Record<string, Schema>;
      const required = (schema['required'] ?? []) as string[];
      const model = Object.fromEntries(Object.entries(properties).map(([k, s]) => [k, valid(s)]));
      let arb: fc.Arbitrary<Record<string, unknown>> = fc.record(model, { requiredKeys: required });
      // anyOf of `required` lists (EditBody): at least one of those keys.
      const anyOf = schema['anyOf'] as Schema[] | undefined;
      if (anyOf !== undefined) arb = arb.filter((o) => anyOf.some((s) => ((s['required'] ?? []) as string[]).every((k) => k in o)));
      return arb;
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** Values that break schemas: wrong types, odd and huge strings, unicode, deep nesting. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, 1.5, 2147483648, -0, 1e308, '', ' ', '0', '1', 'null', '__proto__', [], {}, [[]], { '': '' }),
  fc.constantFrom('\ud800', 'a\udfffb', '\u0000', '\u202e', '\ufeff', 'Ａ', 'é', '😀'.repeat(1001), 'x'.repeat(2001), 'A'.repeat(64), 'g'.repeat(64), ' '.repeat(64)),
  fc.constantFrom('<script>alert(1)</script>', '${7*7}', "'; drop table deliveries; --", '@everyone', '<@123456789012345678>', 'http://example.com', 'javascript:alert(1)'),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.integer({ min: 1, max: 3000 }).map((n) => 'y'.repeat(n)),
  fc.integer({ min: 2, max: 400 }).map((depth) => nest(depth)),
  fc.jsonValue({ maxDepth: 3 }),
  fc.dictionary(fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'x', ''), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
);

function nest(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { a: v };
  return v;
}

/** Paths to every node of a JSON value. */
function nodePaths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [prefix];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...nodePaths(v, [...prefix, i])));
  else if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) out.push(...nodePaths(v, [...prefix, k]));
  return out;
}

type Mutation = { op: 'replace'; value: unknown } | { op: 'delete' } | { op: 'add'; key: string; value: unknown };

/** One mutation applied at the `pick`-th node (modulo the count) of a copy of `value`. */
function mutate(value: unknown, pick: number, mutation: Mutation): unknown {
  const paths = nodePaths(value);
  const path = paths[pick % paths.length] ?? [];
  const copy = structuredClone(value);
  if (path.length === 0) return mutation.op === 'replace' ? mutation.value : copy;
  let parent = copy as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
  const last = path[path.length - 1] as string | number;
  if (mutation.op === 'replace') parent[last] = mutation.value;
  else if (mutation.op === 'delete') {
    if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
  } else {
    const target = parent[last];
    if (typeof target === 'object' && target !== null && !Array.isArray(target)) (target as Record<string, unknown>)[mutation.key] = mutation.value;
    else parent[last] = { [mutation.key]: mutation.value };
  }
  return copy;
}

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 5, arbitrary: hostileValue.map((value) => ({ op: 'replace' as const, value })) },
  { weight: 2, arbitrary: fc.constant({ op: 'delete' as const }) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('extra', 'request_id', 'kind', 'content', 'seq', '__proto__'), hostileValue).map(([key, value]) => ({ op: 'add' as const, key, value })) },
);

/** A few request_ids shared by many requests, so repeats (same or different payload) are frequent. */
export const REQUEST_ID_POOL = ['a', 'b', 'c', 'd', 'e', '0'].map((c) => c.repeat(64));
const requestId = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...REQUEST_ID_POOL) }, { weight: 2, arbitrary: fc.stringMatching(/^[0-9a-f]{64}$/) });

/** A delivery request valid by the contract, sometimes on the sandbox's real guild and user. */
const validDelivery: fc.Arbitrary<Record<string, unknown>> = fc
  .tuple(valid({ $ref: '#/components/schemas/DeliveryRequest' }), requestId, fc.boolean(), fc.constantFrom(...REQUEST_ID_POOL))
  .map(([d, id, real, ref]) => {
    const req: Record<string, unknown> = { ...(d as Record<string, unknown>), request_id: id };
    const target = req['target'] as Record<string, unknown>;
    if (real && req['kind'] === 'post') req['target'] = { ...target, guild_id: SANDBOX_IDS.guild };
    if (real && req['kind'] === 'dm') req['target'] = { user_id: SANDBOX_IDS.user };
    if (real && req['kind'] === 'edit') req['target'] = { ...target, message_ref: ref };
    return req;
  });

const json = (v: unknown): string => JSON.stringify(v) ?? 'null';

const contentType = fc.oneof(
  { weight: 8, arbitrary: fc.constant('application/json') },
  { weight: 3, arbitrary: fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', 'application/xml', 'APPLICATION/JSON', '', 'application/merge-patch+json') },
  { weight: 1, arbitrary: fc.constant(undefined) },
);

/** Raw bodies that are not (quite) JSON, or are JSON in odd ways. */
const rawBody: fc.Arbitrary<string | { oversize: number }> = fc.oneof(
  fc.constantFrom('', '{', 'nul', '[1,]', '{"a":1}x', '\ufeff{}', '{"request_id":1,"request_id":"' + 'a'.repeat(64) + '"}', '1e999999', '"\\ud800"', '[' .repeat(5000) + ']'.repeat(5000)),
  fc.integer({ min: 1, max: 20_000 }).map((depth) => '['.repeat(depth) + ']'.repeat(depth)),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.constantFrom({ oversize: 65_537 }, { oversize: 200_000 }, { oversize: 1_500_000 }),
);

const authFor = (area: 'bridge' | 'admin' | 'none'): fc.Arbitrary<Auth> =>
  fc.oneof({ weight: 12, arbitrary: fc.constant<Auth>(area) }, { weight: 1, arbitrary: fc.constantFrom<Auth>('none', 'wrong', 'malformed', area === 'admin' ? 'bridge' : 'admin') });

/** Query strings: none mostly; odd ones otherwise. */
const query = fc.oneof(
  { weight: 6, arbitrary: fc.constant('') },
  { weight: 2, arbitrary: fc.constantFrom('?probe=1', '?', '?a=1&a=2', '?request_id=' + 'a'.repeat(64), '?%', '?x=%E0%', '?code=ABC&&=', '?' + 'q'.repeat(2000) + '=1') },
  { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 }).map((d) => `?${new URLSearchParams(d).toString()}`) },
);

/** A path parameter: valid, malformed, %-escapes, unicode, empty-ish. */
function param(validArb: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 5, arbitrary: validArb },
    { weight: 2, arbitrary: fc.constantFrom('%', '%E0', '%zz', 'a%', '%C3%28', '%00', '%2F', '%2e%2e', '..', '.', '%20', 'A'.repeat(64), '0'.repeat(18), '-1', 'null') },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }).map(encodeURIComponent) },
    { weight: 1, arbitrary: fc.integer({ min: 100, max: 6000 }).map((n) => '9'.repeat(n)) },
  );
}

const snowflake = fc.stringMatching(/^[1-9][0-9]{16,19}$/);
const destination = fc.constantFrom('alerts', 'deals', 'digest', 'ops');

/** Requests to Herald's contract operations. */
const heraldRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  // POST /mcp/deliveries: valid, mutated, raw.
  {
    weight: 10,
    arbitrary: fc.record({ d: validDelivery, ct: contentType, auth: authFor('bridge'), q: query }).map(({ d, ct, auth, q }) =>
      req('deliveries:valid', 'POST', `/mcp/deliveries${q}`, auth, json(d), ct),
    ),
  },
  {
    weight: 10,
    arbitrary: fc.record({ d: validDelivery, pick: fc.nat(), m: mutation, auth: authFor('bridge') }).map(({ d, pick, m, auth }) =>
      req('deliveries:hostile', 'POST', '/mcp/deliveries', auth, json(mutate(d, pick, m)), 'application/json'),
    ),
  },
  { weight: 3, arbitrary: fc.record({ b: rawBody, ct: contentType, auth: authFor('bridge') }).map(({ b, ct, auth }) => req('deliveries:raw', 'POST', '/mcp/deliveries', auth, b, ct)) },
  // GET /mcp/deliveries/{request_id}
  {
    weight: 4,
    arbitrary: fc.record({ id: param(requestId), auth: authFor('bridge'), q: query }).map(({ id, auth, q }) => req('get-delivery', 'GET', `/mcp/deliveries/${id}${q}`, auth)),
  },
  // GET /mcp/registration/{user_id}
  {
    weight: 2,
    arbitrary: fc.record({ id: param(fc.oneof(fc.constant(SANDBOX_IDS.user), snowflake)), auth: authFor('bridge'), q: query }).map(({ id, auth, q }) =>
      req('registration', 'GET', `/mcp/registration/${id}${q}`, auth),
    ),
  },
  // POST /mcp/pair/redeem
  {
    weight: 3,
    arbitrary: fc
      .record({
        body: fc.oneof(
          valid({ $ref: '#/components/schemas/RedeemRequest' }).map(json),
          fc.record({ code: hostileValue }).map(json),
          hostileValue.map(json),
          rawBody,
        ),
        ct: contentType,
        auth: authFor('bridge'),
        q: query,
      })
      .map(({ body, ct, auth, q }) => req('redeem', 'POST', `/mcp/pair/redeem${q}`, auth, body, ct)),
  },
  // Simple GETs.
  {
    weight: 3,
    arbitrary: fc.record({ p: fc.constantFrom('/mcp/capabilities', '/mcp/recipients', '/healthz', '/readyz'), auth: authFor('bridge'), q: query }).map(({ p, auth, q }) =>
      req('simple-get', 'GET', `${p}${q}`, p.startsWith('/mcp/') ? auth : 'none'),
    ),
  },
  // Admin.
  {
    weight: 2,
    arbitrary: fc.record({ auth: authFor('admin'), q: query }).map(({ auth, q }) => req('admin-list', 'GET', `/admin/destinations${q}`, auth)),
  },
  {
    weight: 4,
    arbitrary: fc
      .record({
        method: fc.constantFrom('PUT', 'PUT', 'DELETE'),
        guild: param(fc.oneof(fc.constant(SANDBOX_IDS.guild), fc.constant(SANDBOX_IDS.otherGuild), fc.stringMatching(/^[0-9]{5,25}$/))),
        dest: param(destination),
        body: fc.oneof(
          fc.record({ channel_id: fc.oneof(fc.constantFrom(...Object.values(SANDBOX_IDS.channels), SANDBOX_IDS.voiceChannel, SANDBOX_IDS.otherChannel), fc.stringMatching(/^[0-9]{5,25}$/)) }).map(json),
          fc.record({ channel_id: hostileValue }).map(json),
          hostileValue.map(json),
          rawBody,
        ),
        auth: authFor('admin'),
      })
      .map(({ method, guild, dest, body, auth }) => req('admin-mapping', method, `/admin/destinations/${guild}/${dest}`, auth, method === 'PUT' ? body : undefined, 'application/json')),
  },
  // Odd methods, paths and headers.
  {
    weight: 4,
    arbitrary: fc
      .record({
        method: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'TRACE', 'PROPFIND', 'PURGE'),
        path: fc.oneof(
          fc.constantFrom('/mcp/capabilities', '/mcp/deliveries', '/mcp/recipients', '/mcp/pair/redeem', '/healthz', '/readyz', '/admin/destinations', `/mcp/deliveries/${'a'.repeat(64)}`),
          fc.constantFrom('/mcp/capabilities/', '/mcp//capabilities', '/MCP/capabilities', '/mcp/', '/mcp', '/mcp/./capabilities', '/mcp/../admin/destinations', '/mcp/%63apabilities', '/admin/', '/admin', '/mcp/nope', '/x', '/%', '/mcp/%', '/admin/%E0', '//', '/metrics', '/docs', '/'),
          fc.string({ unit: 'grapheme', maxLength: 40 }).map((s) => `/mcp/${encodeURIComponent(s)}`),
          fc.integer({ min: 1000, max: 7000 }).map((n) => `/mcp/${'p'.repeat(n)}`),
        ),
        auth: fc.constantFrom<Auth>('bridge', 'admin', 'none', 'wrong', 'malformed'),
        body: fc.option(fc.oneof(hostileValue.map(json), rawBody), { nil: undefined }),
        ct: contentType,
        q: query,
      })
      .map(({ method, path, auth, body, ct, q }) => req('odd', method, `${path}${q}`, auth, method === 'GET' || method === 'HEAD' ? undefined : body, ct)),
  },
);

function req(category: string, method: string, path: string, auth: Auth, body?: string | { oversize: number }, ct?: string): FuzzRequest {
  return { category, server: 'herald', method, path, auth, headers: ct !== undefined && body !== undefined ? { 'content-type': ct } : {}, ...(body !== undefined ? { body } : {}) };
}

/** An Invocation for the control route: valid, or with one hostile field. */
const invocation = fc
  .record({
    userId: fc.constantFrom(SANDBOX_IDS.user, '111111111111111111', '999999999999999999'),
    guildId: fc.option(fc.constant(SANDBOX_IDS.guild), { nil: undefined }),
    cmd: fc.constantFrom(
      { command: 'agent', subcommand: 'register' },
      { command: 'agent', subcommand: 'pair' },
      { command: 'agent', subcommand: 'unregister' },
      { command: 'agent', subcommand: 'nope' },
      { command: 'destinations', subcommand: 'list' },
      { command: 'destinations', subcommand: 'set' },
      { command: 'destinations', subcommand: 'clear' },
      { command: 'nope', subcommand: undefined },
    ),
    options: fc.oneof(
      { weight: 2, arbitrary: fc.constant({}) },
      {
        weight: 3,
        arbitrary: fc.record(
          {
            destination: fc.oneof({ weight: 3, arbitrary: destination }, { weight: 1, arbitrary: hostileValue }),
            channel: fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...Object.values(SANDBOX_IDS.channels), SANDBOX_IDS.otherChannel) }, { weight: 1, arbitrary: hostileValue }),
          },
          { requiredKeys: [] },
        ),
      },
    ),
    permissions: fc.option(fc.oneof(fc.constantFrom('0', '32', '8', '18446744073709551615'), hostileValue), { nil: undefined }),
  })
  .map(({ cmd, ...rest }) => ({ ...rest, ...cmd }));

/** Requests to the sandbox's control route (acting as a user invoking a slash command). */
const controlRequest: fc.Arbitrary<FuzzRequest> = fc
      .record({
        body: fc.oneof({ weight: 5, arbitrary: invocation.map(json) }, { weight: 2, arbitrary: fc.record({ inv: invocation, pick: fc.nat(), m: mutation }).map(({ inv, pick, m }) => json(mutate(inv, pick, m))) }, { weight: 1, arbitrary: rawBody }),
        ct: fc.oneof({ weight: 4, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: contentType }),
        origin: fc.option(fc.constantFrom('SELF', 'SELF', 'https://evil.example', 'null'), { nil: undefined, freq: 2 }),
        site: fc.option(fc.constantFrom('same-origin', 'same-origin', 'cross-site', 'same-site', 'none'), { nil: undefined, freq: 2 }),
      })
      .map(({ body, ct, origin, site }) => ({
        category: 'sandbox:interactions',
        server: 'sandbox' as const,
        method: 'POST',
        path: '/sandbox/api/interactions',
        auth: 'none' as const,
        headers: { ...(ct !== undefined ? { 'content-type': ct } : {}), ...(origin !== undefined ? { origin } : {}), ...(site !== undefined ? { 'sec-fetch-site': site } : {}) },
        body,
      }));

/** Requests to the rest of the sandbox: its page, state and faults, Discord's REST routes. */
const sandboxRequest: fc.Arbitrary<FuzzRequest> = fc
      .record({
        method: fc.constantFrom('GET', 'POST', 'DELETE', 'PUT', 'PATCH'),
        path: fc.oneof(
          fc.constantFrom('/sandbox', '/sandbox/api/state', '/sandbox/api/faults', '/', '/sandbox/api/interactions'),
          fc.constantFrom('/api/v10/users/@me', '/api/v10/gateway/bot', `/api/v10/channels/${SANDBOX_IDS.channels.alerts}/messages`, '/api/v10/applications/@me', '/api/v10/interactions/1/x/callback', '/api/v10/users/@me/channels'),
          param(fc.constant('x')).map((p) => `/api/v10/channels/${p}`),
          param(fc.constant('x')).map((p) => `/sandbox/${p}`),
        ),
        body: fc.option(fc.oneof(hostileValue.map(json), rawBody), { nil: undefined }),
        q: query,
      })
      // Faults are only cleared here: injecting them is the chaos campaign's job.
      .filter(({ method, path }) => !(method === 'POST' && path === '/sandbox/api/faults'))
      .map(({ method, path, body, q }) => ({
        category: path.startsWith('/api/') ? 'sandbox:rest' : 'sandbox:page',
        server: 'sandbox' as const,
        method,
        path: `${path}${q}`,
        auth: 'none' as const,
        headers: { 'content-type': 'application/json' },
        ...(body !== undefined && method !== 'GET' ? { body } : {}),
      }));

/** Frames sent to the sandbox's gateway without a valid IDENTIFY (no token is known). */
const gatewayRequest: fc.Arbitrary<FuzzRequest> = fc
  .array(
    fc.oneof(
      fc.record({ op: fc.constantFrom(1, 2, 6, 3, 8, 99, -1, '2', null), d: hostileValue }).map(json),
      fc.constantFrom('{', '', 'null', '[]', '{"op":2,"d":{"token":"x"}}', '{"op":1,"d":null}'),
      hostileValue.map(json),
    ),
    { minLength: 1, maxLength: 3 },
  )
  .map((frames) => ({ category: 'gateway', server: 'gateway' as const, method: 'WS', path: '/gateway', auth: 'none' as const, headers: {}, frames }));

export { CATEGORY_GROUPS, type CategoryGroup };

/** Every kind of request, weighted toward Herald's own API. */
export function fuzzRequest(groups: readonly CategoryGroup[] = CATEGORY_GROUPS): fc.Arbitrary<FuzzRequest> {
  const choices: fc.WeightedArbitrary<FuzzRequest>[] = [];
  if (groups.includes('herald')) choices.push({ weight: 12, arbitrary: heraldRequest });
  if (groups.includes('control')) choices.push({ weight: 2, arbitrary: controlRequest });
  if (groups.includes('sandbox')) choices.push({ weight: 1, arbitrary: sandboxRequest });
  if (groups.includes('gateway')) choices.push({ weight: 1, arbitrary: gatewayRequest });
  return fc.oneof(...choices);
}
