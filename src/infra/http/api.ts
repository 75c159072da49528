import type { Context as KoaContext, Middleware } from 'koa';
import type { ParsedUrlQuery } from 'node:querystring';
import { OpenAPIBackend, type Context, type Document, type Operation, type Request as ApiRequest } from 'openapi-backend';
import type { Logger } from 'pino';
import { withUtf16Lengths } from '../contract/ajv.js';
import type { PolicyCheck } from './policy.middleware.js';
import { isStoreUnavailable } from '../db/database.js';
import { describeSchema, isPlainObject, SchemaReasons } from '../contract/reasons.js';
import { contractWith, specDocument, type Contract, type SchemaNode } from '../contract/spec.js';
import { unstorableField } from '../contract/storable.js';
import { ConflictError, errorSummary, InvalidRequestError, NotFoundError, UpstreamError } from '../errors.js';
import { bearerCheck, FailureThrottle } from './auth.js';
import { readJsonBody } from './body.js';
import { errorReply, type Reply } from './reply.js';
import { routeOnce } from './routing.js';
import { directCall, plainRoutes, type DirectPlan, type Parameter, type PlainRoutes } from './shortcuts.js';

export interface ApiOptions {
  bridgeToken: string | undefined;
  adminToken: string | undefined;
  /** Each module's operation handlers; together they must cover every operationId exactly once. */
  operations: readonly OperationHandlers[];
  log: Logger;
  /** Told of each refused bearer token (metrics). */
  onAuthFailure?: (area: 'bridge' | 'admin', throttled: boolean) => void;
  /** The operator's policy (HERALD_POLICY), asked for every operation matched, once its body is read: src/infra/http/policy.middleware.ts. */
  policy?: PolicyCheck | undefined;
  /** The contract served: the bundle with the started modules' own documents (default: the bundle alone). */
  contract?: Contract;
}

/** What the framework hands the modules' handlers: the contract's own checks. */
export interface HandlerKit {
  /** The contract's component schemas (after openapi-backend resolved them). */
  readonly schemas: Readonly<Record<string, SchemaNode>>;
  readonly reasons: SchemaReasons;
  /** Validate a body the way its operation's contract says, throwing the contract's reason. */
  checkBody(operationId: string, body: unknown): void;
}

export type Handler = (c: Context, body: unknown, koa: KoaContext) => Promise<Reply> | Reply;

/** The contract bound to Koa, the operations answered without it, and the contract it serves (`/openapi.yaml`). */
export type Api = Middleware & { plain: PlainRoutes; contract: Contract };
/** A module's handlers by operationId, built once the contract is loaded. */
export type OperationHandlers = (kit: HandlerKit) => Record<string, Handler>;

/**
 * The contract bound to Koa: openapi-backend routes and validates every request against
 * `openapi/herald.yaml`, and each operationId has exactly one handler here.
 */
export async function createApi(deps: ApiOptions): Promise<Api> {
  const contract = deps.contract ?? contractWith([]);
  const api = new OpenAPIBackend({
    definition: specDocument(contract.document) as unknown as Document,
    // The document is OpenAPI 3.1; openapi-backend would check it against the 3.0 schema. CI lints it with redocly.
    quick: true,
    strict: true,
    ignoreTrailingSlashes: false,
    customizeAjv: (ajv) => withUtf16Lengths(ajv),
    validate: (c) => validates(c.operation),
  });
  await api.init();
  const routing = routeOnce(api.router);
  const schemas = (api.definition.components?.schemas ?? {}) as unknown as Record<string, SchemaNode>;
  const reasons = new SchemaReasons();

  /** Validate a body the way its operation's contract says, throwing the contract's reason. */
  const checkBody = (operationId: string, body: unknown): void => {
    const op = api.getOperation(operationId);
    const invalid = (op as Record<string, unknown> | undefined)?.['x-herald-invalid-body'] as { error: string } | undefined;
    const schema = (op?.requestBody as { content?: Record<string, { schema?: SchemaNode }> } | undefined)?.content?.['application/json']?.schema;
    if (schema === undefined) return;
    if (invalid !== undefined) {
      if (reasons.firstFailure(schema, body) !== undefined) throw new InvalidRequestError(invalid.error);
      return;
    }
    if (!isPlainObject(body)) throw new InvalidRequestError(schema['x-herald-reason'] ?? 'request body must be an object');
    reasons.check(schema, body);
  };

  const kit: HandlerKit = { schemas, reasons, checkBody };
  const handlers: Record<string, Handler> = {};
  for (const build of deps.operations) {
    for (const [id, handler] of Object.entries(build(kit))) {
      if (handlers[id] !== undefined) throw new Error(`two handlers for operation ${id}`);
      handlers[id] = handler;
    }
  }
  // Operations marked `x-herald-outside-api` (an event stream, files: not JSON) are documented here and served by a plain route.
  const outside = (op: Operation | undefined): boolean => (op as Record<string, unknown> | undefined)?.['x-herald-outside-api'] === true;
  const unbound = api
    .getOperations()
    .flatMap((op) => (op.operationId !== undefined && !outside(op) && handlers[op.operationId] === undefined ? [op.operationId] : []));
  if (unbound.length > 0) throw new Error(`no handler for operation(s) ${unbound.join(', ')}`);
  Object.assign(handlers, {
    validationFail: (c, body) => {
      const errors = c.validation.errors ?? [];
      const parameters = (c.operation.parameters ?? []) as unknown as Parameter[];
      // Path parameters carry their own answer (a malformed id is "not found", like an unknown path).
      for (const err of errors) {
        const m = /^\/path\/([^/]+)/.exec(err.instancePath);
        if (m === null) continue;
        const invalid = parameters.find((p) => p.in === 'path' && p.name === m[1])?.['x-herald-invalid'];
        if (invalid !== undefined) return { status: invalid.status, body: { error: invalid.error } };
      }
      // Query parameters: the contract's reason, else one naming the parameter and what it must be.
      for (const err of errors) {
        const m = /^\/query(?:\/([^/]+))?$/.exec(err.instancePath);
        if (m === null) continue;
        const missing = m[1] === undefined ? (err.params as { missingProperty?: unknown }).missingProperty : undefined;
        const param = parameters.find((p) => p.in === 'query' && p.name === (m[1] ?? missing));
        if (param === undefined) continue;
        const schema = param.schema ?? {};
        const error = missing !== undefined ? `${param.name} is required: ${describeSchema(schema)}` : (schema['x-herald-reason'] ?? `${param.name} must be ${describeSchema(schema)}`);
        return { status: 400, body: { error } };
      }
      // Bodies: the first failure in the schema's order, with the contract's reason.
      checkBody(c.operation.operationId ?? '', body);
      // The schema and the ordered checks disagree: answer with the schema's own words.
      const first = c.validation.errors?.[0];
      return { status: 400, body: { error: `${first?.instancePath ?? ''} ${first?.message ?? 'is invalid'}`.trim() } };
    },
    notFound: () => ({ status: 404, body: { error: 'not found' } }),
    methodNotAllowed: () => errorReply<'MethodNotAllowed'>(405, { error: 'method not allowed' }),
  } satisfies Record<string, Handler>);
  // The middleware below authenticates before routing (the protocol's order) and checks the
  // operation's security before reading a body; openapi-backend checks the same again.
  for (const [scheme, tier] of Object.entries(SCHEME_TIER)) api.registerSecurityHandler(scheme, (_c, koa: KoaContext) => koa.state['authenticated'] === tier);
  handlers['unauthorizedHandler'] = () => errorReply<'Unauthorized'>(401, { error: 'unauthorized' });
  for (const [id, handler] of Object.entries(handlers)) {
    api.register(id, (c: Context, koa: KoaContext, body: unknown) => runHandler(handler, c, body, deps.log, koa));
  }

  /** Whether the operation's security (the contract's, or the document's default) takes a caller of this tier. */
  const defaultSecurity = (api.definition.security ?? []) as Record<string, unknown>[];
  const admits = (op: Operation, tier: Tier | undefined): boolean => {
    const requirements = (op.security ?? defaultSecurity) as Record<string, unknown>[];
    return requirements.length === 0 || requirements.some((r) => Object.keys(r).every((scheme) => SCHEME_TIER[scheme] !== undefined && SCHEME_TIER[scheme] === tier));
  };

  const directPlans = new Map<Operation, DirectPlan | null>();
  const throttle = new FailureThrottle();
  const checks = {
    bridge: deps.bridgeToken === undefined ? undefined : bearerCheck(deps.bridgeToken),
    admin: deps.adminToken === undefined ? undefined : bearerCheck(deps.adminToken),
  };
  const middleware: Middleware = async (ctx, next) => {
    const area = ctx.path.startsWith('/mcp/') ? 'bridge' : ctx.path.startsWith('/admin/') ? 'admin' : undefined;
    if (area !== undefined) {
      const check = checks[area];
      if (check === undefined) {
        return send(ctx, area === 'bridge' ? errorReply<'BridgeNotConfigured'>(503, { error: 'bridge not configured' }) : errorReply<'AdminNotConfigured'>(503, { error: 'admin not configured' }));
      }
      const authorization = ctx.get('authorization') || undefined;
      const ownToken = check(authorization);
      // Read-only admin operations also take the bridge token (their contract security says so).
      const asBridge = area === 'admin' && !ownToken && checks.bridge?.(authorization) === true;
      if (!asBridge && !ownToken) {
        const verdict = throttle.fail(ctx.ip);
        deps.onAuthFailure?.(area, verdict.limited);
        return send(
          ctx,
          verdict.limited
            ? errorReply<'TooManyFailedAttempts'>(429, { error: 'too many failed attempts' }, { 'Retry-After': String(verdict.retryAfterSeconds) })
            : errorReply<'Unauthorized'>(401, { error: 'unauthorized' }),
        );
      }
      ctx.state['authenticated'] = asBridge ? 'bridge' : area;
    }
    const request: ApiRequest = { method: ctx.method, path: decodablePath(ctx.path), query: {}, headers: ctx.headers as ApiRequest['headers'] };
    // Matched once: handleRequest below is handed this same request object and reuses the match.
    const operation = routing.operation(request);
    // For the request metrics: the operationId, a fixed set (never the path, which holds ids).
    ctx.state['operation'] = operation?.operationId;
    // Query parameters the operation does not declare are ignored, not refused.
    request.query = declaredQuery(operation, ctx.query);
    if (outside(operation)) {
      // Served by a plain route (files, event streams): the operator's policy holds there too, asked before the hand-off.
      const refused = operation === undefined ? undefined : await deps.policy?.(ctx, operation.operationId, operation, { query: request.query, path: pathParameters(operation.path, request.path) });
      return refused === undefined ? next() : send(ctx, refused);
    }
    if (operation === undefined && area === undefined && !routing.knowsPath(request)) return next();
    // A token the operation does not take (the bridge token on an admin-only write) is refused
    // here, before the body is read: an unauthorised caller learns nothing from how it is parsed.
    if (operation !== undefined && !admits(operation, ctx.state['authenticated'] as Tier | undefined)) return send(ctx, errorReply<'Unauthorized'>(401, { error: 'unauthorized' }));
    let body: unknown;
    if (operation?.requestBody !== undefined) {
      const parsed = await readJsonBody(ctx.req);
      if (!parsed.ok && parsed.problem === 'aborted') {
        ctx.respond = false;
        return undefined;
      }
      if (!parsed.ok) {
        const invalidBody = (operation as Record<string, unknown>)['x-herald-invalid-body'] as { status: number; error: string } | undefined;
        return send(
          ctx,
          parsed.problem === 'too_large'
            ? // The rest of the body was discarded, but may not have ended: do not wait for it on this connection.
              errorReply<'PayloadTooLarge'>(413, { error: 'request body too large' }, { Connection: 'close' })
            : { status: invalidBody?.status ?? 400, body: { error: invalidBody?.error ?? 'request body must be valid JSON' } },
        );
      }
      body = parsed.value;
      request.body = body;
    }
    // The operator's policy, for every operation matched (before any shortcut below hands it off).
    const refused = operation === undefined || deps.policy === undefined ? undefined : await deps.policy(ctx, operation.operationId, operation, { body, query: request.query, path: pathParameters(operation.path, request.path) });
    if (refused !== undefined) return send(ctx, refused);
    // An operation without a body whose parameters the contract checks by a pattern alone: answered
    // here when they match, without openapi-backend parsing and validating the request again.
    const direct = body === undefined ? directCall(operation, request.path, directPlans) : undefined;
    // The handler as registered with openapi-backend (what handleRequest would call).
    const registered = direct !== undefined ? (api.handlers[operation?.operationId ?? ''] as ((c: Context, koa: KoaContext, body: unknown) => Promise<Reply>) | undefined) : undefined;
    if (direct !== undefined && registered !== undefined) {
      const c = { api, operation, request: { ...request, params: direct, cookies: {}, requestBody: undefined }, validation: { valid: true, errors: null }, security: {} } as unknown as Context;
      return send(ctx, await registered(c, ctx, undefined));
    }
    // Text Herald keeps goes to PostgreSQL, whose text and jsonb hold neither U+0000 nor a lone
    // surrogate: refused here, on every operation (those whose handlers validate too), naming the field.
    const unfit = operation !== undefined ? unstorableField(request.query, body) : undefined;
    if (unfit !== undefined) {
      const invalidBody = (operation as Record<string, unknown>)['x-herald-invalid-body'] as { status: number; error: string } | undefined;
      return send(ctx, { status: invalidBody?.status ?? 400, body: { error: invalidBody?.error ?? unfit } });
    }
    // An operation whose handler validates its body and that takes no parameters (an accept): its
    // handler is called here. openapi-backend would parse the request again (headers, cookies, the
    // path against its template) and validate nothing; the token was checked above.
    if (body !== undefined && handlerValidates(operation) && (operation?.parameters ?? []).length === 0) {
      const own = api.handlers[operation?.operationId ?? ''] as ((c: Context, koa: KoaContext, body: unknown) => Promise<Reply>) | undefined;
      if (own !== undefined) {
        const c = { api, operation, request: { ...request, params: {}, cookies: {}, requestBody: body }, validation: { valid: true, errors: null }, security: {} } as unknown as Context;
        return send(ctx, await own(c, ctx, body));
      }
    }
    const result = (await api.handleRequest(request, ctx, body)) as Reply;
    return send(ctx, result);
  };
  return Object.assign(middleware, { plain: plainRoutes(api, deps.log), contract });
}

/**
 * Whether the contract validates the operation's input here. An operation marked
 * `x-herald-handler-validates` has its handler check its input, in an order of its own over the
 * same contract schemas: validating it here first would be the work done twice. An operation with
 * neither parameters nor a body (the probes, capabilities) has nothing to validate.
 */
function validates(operation: Operation | undefined): boolean {
  if (operation === undefined || handlerValidates(operation)) return false;
  return (operation.parameters ?? []).length > 0 || operation.requestBody !== undefined;
}

/** Whether the operation's handler checks its input itself (`x-herald-handler-validates`). */
function handlerValidates(operation: Operation | undefined): boolean {
  return (operation as Record<string, unknown> | undefined)?.['x-herald-handler-validates'] === true;
}

/** Who the middleware authenticated: the bridge token's caller or the admin token's. */
type Tier = 'bridge' | 'admin';
/** The contract's security schemes, by the tier whose token satisfies them. */
const SCHEME_TIER: Readonly<Record<string, Tier>> = { bridgeToken: 'bridge', adminToken: 'admin' };

/**
 * The path with every `%` of a segment whose escapes do not decode (`%`, `%E0`) escaped itself:
 * such a segment is then a literal, malformed parameter value (refused as the parameter says,
 * e.g. 404 `not found`) instead of an exception while decoding it.
 */
export function decodablePath(path: string): string {
  // Most paths escape nothing: nothing to check.
  if (!path.includes('%')) return path;
  return path
    .split('/')
    .map((segment) => {
      try {
        decodeURIComponent(segment);
        return segment;
      } catch {
        return segment.replace(/%/g, '%25');
      }
    })
    .join('/');
}

/**
 * The path's parameters by name, as the template matched them: what a policy declaration's
 * `/path/...` pointers read. Left as sent (not decoded), as the handlers are given them, so the
 * policy judges the very value the operation acts on. A parameter is a whole segment in Herald's contracts.
 */
export function pathParameters(template: string, path: string): Record<string, string> {
  const values = path.split('/');
  const params: Record<string, string> = {};
  for (const [i, segment] of template.split('/').entries()) {
    const name = /^\{([^}]+)\}$/.exec(segment)?.[1];
    const value = values[i];
    if (name !== undefined && value !== undefined) params[name] = value;
  }
  return params;
}

/** Each operation's declared query parameters' names, read from the contract once. */
const queryNames = new WeakMap<Operation, ReadonlySet<string>>();

/** Only the query parameters the operation declares. */
function declaredQuery(operation: Operation | undefined, query: ParsedUrlQuery): Record<string, string | string[]> {
  let declared = operation === undefined ? undefined : queryNames.get(operation);
  if (declared === undefined) {
    declared = new Set((operation?.parameters ?? []).flatMap((p) => ('in' in p && p.in === 'query' ? [p.name] : [])));
    if (operation !== undefined) queryNames.set(operation, declared);
  }
  if (declared.size === 0) return {};
  const kept: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(query)) if (declared.has(name) && value !== undefined) kept[name] = value;
  return kept;
}

async function runHandler(handler: Handler, c: Context, body: unknown, log: Logger, koa: KoaContext): Promise<Reply> {
  try {
    return await handler(c, body, koa);
  } catch (err) {
    if (err instanceof InvalidRequestError) return { status: 400, body: { error: err.reason } };
    if (err instanceof NotFoundError) return { status: 404, body: { error: err.reason } };
    if (err instanceof ConflictError) return { status: 422, body: { error: err.reason } };
    if (err instanceof UpstreamError) return { status: 502, body: { error: err.reason } };
    if (isStoreUnavailable(err)) return { status: 503, body: { error: 'store unavailable' } };
    log.error({ err: errorSummary(err), operation: c.operation?.operationId }, 'handler failed');
    return { status: 500, body: { error: 'internal error' } };
  }
}

function send(ctx: KoaContext, r: Reply): void {
  ctx.status = r.status;
  for (const [k, v] of Object.entries(r.headers ?? {})) ctx.set(k, v);
  if (r.body !== undefined) ctx.body = r.body;
}
