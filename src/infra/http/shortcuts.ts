import type { Context as KoaContext } from 'koa';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Context, OpenAPIBackend, Operation } from 'openapi-backend';
import type { Logger } from 'pino';
import type { SchemaNode } from '../contract/spec.js';
import { errorSummary } from '../errors.js';
import type { Reply } from './reply.js';

/**
 * The requests Herald's HTTP layer answers without openapi-backend parsing them again: the probes
 * (before Koa builds a context) and operations whose parameters a pattern alone checks.
 */

/**
 * Answers a request for an operation marked `x-herald-plain` (openapi/probes.yaml) straight from
 * Node's request, before Koa builds its context, and says so (true); false: not such a request.
 * `answered` is told the operation, the status and the milliseconds taken, as the other requests' are.
 */
export type PlainRoutes = (req: IncomingMessage, res: ServerResponse, answered: (operation: string, status: number, ms: number) => void) => boolean;

/**
 * The operations marked `x-herald-plain`, answered from Node's request as the Koa path answers them:
 * a GET of the exact path (a query string is ignored, as undeclared query parameters are), the same
 * status, headers and JSON to the byte. A marked operation with parameters, a body or security is a
 * contract mistake, refused at start-up.
 */
export function plainRoutes(api: OpenAPIBackend, log: Logger): PlainRoutes {
  const byPath = new Map<string, Operation>();
  for (const op of api.getOperations()) {
    if ((op as Record<string, unknown>)['x-herald-plain'] !== true) continue;
    if (op.method !== 'get' || op.path.includes('{') || (op.parameters ?? []).length > 0 || op.requestBody !== undefined || op.security === undefined || op.security.length > 0) {
      throw new Error(`operation ${op.operationId ?? op.path} is marked x-herald-plain but takes parameters, a body or a token`);
    }
    byPath.set(op.path, op);
  }
  return (req, res, answered) => {
    if (req.method !== 'GET' || byPath.size === 0) return false;
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const operation = byPath.get(q === -1 ? url : url.slice(0, q));
    const registered = operation === undefined ? undefined : (api.handlers[operation.operationId ?? ''] as ((c: Context, koa: KoaContext | undefined, body: unknown) => Promise<Reply>) | undefined);
    if (operation === undefined || registered === undefined) return false;
    const started = performance.now();
    const c = { api, operation, request: { method: 'get', path: operation.path, headers: {}, query: {}, params: {}, cookies: {}, requestBody: undefined }, validation: { valid: true, errors: null }, security: {} } as unknown as Context;
    void (async () => {
      const r = await registered(c, undefined, undefined);
      // What Koa writes for a JSON body: its type and length first, then Node's own headers.
      const json = r.body === undefined ? '' : JSON.stringify(r.body);
      res.writeHead(r.status, { ...r.headers, ...(r.body === undefined ? {} : { 'Content-Type': 'application/json; charset=utf-8' }), 'Content-Length': Buffer.byteLength(json) });
      res.end(json);
      answered(operation.operationId ?? '', r.status, performance.now() - started);
    })().catch((err: unknown) => {
      log.error({ err: errorSummary(err), operation: operation.operationId }, 'plain route failed');
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'application/json; charset=utf-8' });
      res.end('{"error":"internal error"}');
    });
    return true;
  };
}

/** An operation's parameter as the dereferenced contract has it, with Herald's answer for an invalid value. */
export interface Parameter {
  name: string;
  in: string;
  schema?: SchemaNode;
  'x-herald-invalid'?: { status: number; error: string };
}

/** How an operation's path parameters are read and checked without openapi-backend, when they can be. */
export interface DirectPlan {
  template: RegExp;
  params: { name: string; pattern: RegExp }[];
}

/** Keywords of a parameter's schema that validate nothing. */
const ANNOTATIONS = new Set(['description', 'example', 'examples', 'title']);

/**
 * An operation's parameters when the contract's validation of them is a pattern per path parameter
 * and nothing else (no body, no query or header parameters, `type: string` and `pattern` only): the
 * values (raw path segments, as openapi-backend reads them) when each matches its pattern, else
 * undefined (the request goes through openapi-backend, which validates and answers as it always did).
 */
export function directCall(operation: Operation | undefined, path: string, plans: Map<Operation, DirectPlan | null>): Record<string, string> | undefined {
  if (operation === undefined || operation.requestBody !== undefined) return undefined;
  let plan = plans.get(operation);
  if (plan === undefined) {
    plan = directPlan(operation);
    plans.set(operation, plan);
  }
  if (plan === null) return undefined;
  const m = plan.template.exec(path);
  if (m === null) return undefined;
  const params: Record<string, string> = {};
  for (const [i, p] of plan.params.entries()) {
    const value = m[i + 1] ?? '';
    if (!p.pattern.test(value)) return undefined;
    params[p.name] = value;
  }
  return params;
}

function directPlan(operation: Operation): DirectPlan | null {
  if ((operation as Record<string, unknown>)['x-herald-outside-api'] === true) return null;
  const names = [...operation.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] ?? '');
  const declared = (operation.parameters ?? []) as unknown as Parameter[];
  const params: DirectPlan['params'] = [];
  for (const p of declared) {
    if (p.in !== 'path' || p.schema === undefined) return null;
    const schema = p.schema as Record<string, unknown>;
    const simple = Object.keys(schema).every((k) => k === 'type' || k === 'pattern' || ANNOTATIONS.has(k) || k.startsWith('x-'));
    if (!simple || schema['type'] !== 'string' || typeof schema['pattern'] !== 'string') return null;
    params.push({ name: p.name, pattern: new RegExp(schema['pattern'], 'u') });
  }
  if (params.length !== names.length || names.some((n, i) => params[i]?.name !== n)) {
    // Declared in another order than the path has them: read them by the path's order.
    const byName = new Map(params.map((p) => [p.name, p]));
    const ordered = names.map((n) => byName.get(n));
    if (ordered.some((p) => p === undefined) || ordered.length !== params.length) return null;
    params.splice(0, params.length, ...(ordered as DirectPlan['params']));
  }
  const literal = operation.path.split(/\{[^}]+\}/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return { template: new RegExp(`^${literal.join('([^/]+)')}$`), params };
}

