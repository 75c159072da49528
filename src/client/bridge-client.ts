import { AsyncLocalStorage } from 'node:async_hooks';
import createClient from 'openapi-fetch';
import type { components, operations, paths } from '../../generated/api.js';
import { loadSpec } from '../infra/contract/spec.js';
import type { BridgeResult } from '../infra/mcp/tool.js';

/** A schema of the contract, by its name (`Schema<'DeliveryRequest'>`). */
export type Schema<N extends keyof components['schemas']> = components['schemas'][N];

export type { BridgeResult };

/** Longest wait between two tries when retrying for a time (retryForMs). */
const MAX_TIMED_BACKOFF_MS = 2_000;

export interface BridgeClientOptions {
  /** Herald's base URL, e.g. http://127.0.0.1:8787 */
  baseUrl: string;
  /** MCP_BRIDGE_TOKEN */
  token: string;
  /** Retries of network errors and 5xx answers (default 4). */
  retries?: number;
  /** First backoff in ms; doubles each retry, with jitter (default 250). */
  backoffMs?: number;
  /**
   * Instead of a number of retries, keep retrying for this long (backoff capped at 2 s), so riding
   * out a bridge restart does not depend on how the jitter fell.
   */
  retryForMs?: number;
  /**
   * With retryForMs: while this client has not reached the bridge yet, or its last try found it
   * down, retry an unreachable bridge only this long, so a bridge that is not running is said at
   * once rather than waited for. retryForMs still rides out a restart of a bridge that was
   * answering. Default: retryForMs.
   */
  unreachableRetryForMs?: number;
  fetch?: typeof fetch;
  /** Extra headers on every request (e.g. `X-Herald-Client: mcp`, which labels the archive's action log). */
  headers?: Record<string, string>;
  /** Contract documents beside the package's own (a module's own contract file), so `call` reaches their operations by id. */
  contracts?: readonly Record<string, unknown>[];
}

/** Headers every bridge call made inside `withCallHeaders` carries (a caller's trace context). */
const callHeaders = new AsyncLocalStorage<Readonly<Record<string, string>>>();

/**
 * Runs `fn` with every bridge call it makes (any client's, retries included) carrying `headers`
 * too: what belongs to one incoming request rather than to a client, such as its `traceparent`.
 */
export function withCallHeaders<T>(headers: Readonly<Record<string, string>>, fn: () => T): T {
  return callHeaders.run(headers, fn);
}

/**
 * The bridge protocol's client, typed from the contract (openapi-fetch over `generated/`). Network
 * errors and 5xx answers are retried with backoff, re-sending the very same request, so a delivery
 * keeps its request_id and the bridge answers a retry with the delivery already stored.
 */
export function createBridgeClient(options: BridgeClientOptions) {
  const retries = options.retries ?? 4;
  const backoffMs = options.backoffMs ?? 250;
  const given = options.fetch ?? fetch;
  // The headers of the call in progress (withCallHeaders), set on each request as it goes.
  const baseFetch = (request: Request): Promise<Response> => {
    for (const [name, value] of Object.entries(callHeaders.getStore() ?? {})) request.headers.set(name, value);
    return given(request);
  };
  // Whether the bridge answered the last time it was asked (anything, even a 5xx, is an answer).
  let answering = false;
  const retryingFetch = async (request: Request): Promise<Response> => {
    const started = Date.now();
    const retryForMs = answering ? options.retryForMs : (options.unreachableRetryForMs ?? options.retryForMs);
    for (let attempt = 0; ; attempt++) {
      const left = retryForMs === undefined ? Infinity : started + retryForMs - Date.now();
      const last = retryForMs === undefined ? attempt >= retries : left <= 0;
      const delay = retryForMs === undefined ? Math.random() * backoffMs * 2 ** attempt : Math.min(left, Math.random() * Math.min(MAX_TIMED_BACKOFF_MS, backoffMs * 2 ** attempt));
      try {
        const response = await baseFetch(request.clone());
        answering = true;
        if (response.status < 500 || last) return response;
      } catch (err) {
        // A call its caller gave up on (CallOptions.signal) is not retried.
        if (request.signal.aborted) throw err;
        if (last) {
          answering = false;
          throw err;
        }
      }
      if (request.signal.aborted) throw request.signal.reason;
      await new Promise((r) => setTimeout(r, delay));
    }
  };
  const api = createClient<paths>({ baseUrl: options.baseUrl, headers: { ...(options.headers ?? {}), authorization: `Bearer ${options.token}` }, fetch: retryingFetch });

  /** `keepBody`: a refusal also carries its whole body (e.g. the archive's storage warning). */
  async function run<T>(call: () => Promise<{ data?: T; error?: unknown; response: Response }>, keepBody = false): Promise<BridgeResult<T>> {
    try {
      const { data, error, response } = await call();
      if (data !== undefined && response.ok) return { ok: true, status: response.status, data };
      if (response.status === 204) return { ok: true, status: 204, data: undefined as T };
      const reason = typeof error === 'object' && error !== null && 'error' in error ? String((error as { error: unknown }).error) : `HTTP ${response.status}`;
      return { ok: false, status: response.status, error: reason, ...(keepBody && typeof error === 'object' && error !== null ? { body: error } : {}) };
    } catch (err) {
      return { ok: false, status: 0, error: 'bridge unreachable', url: options.baseUrl, cause: networkCause(err) };
    }
  }

  const routes = routesOf([loadSpec().document, ...(options.contracts ?? [])]);

  /**
   * Call one operation of the contract by its operationId: the path's parameters filled in, the
   * query and the body sent as the contract says, retried as above unless `once` (an operator view
   * that adds to an answer and must not hold it up; a start a retry would only find running).
   * `keepBody`: a refusal also carries its whole body (e.g. the archive's storage warning).
   */
  function call<Id extends OperationId>(id: Id, input?: CallInput<operations[Id]>, how?: CallOptions): Promise<BridgeResult<CallOutput<operations[Id]>>> {
    return request(id, input as UntypedInput | undefined, how) as Promise<BridgeResult<CallOutput<operations[Id]>>>;
  }

  /** The same for an operation of a contract document given in `contracts` (a module's own), untyped. */
  function request(id: string, input: UntypedInput = {}, how: CallOptions = {}): Promise<BridgeResult<unknown>> {
    const route = routes.get(id);
    if (route === undefined) return Promise.resolve({ ok: false, status: 0, error: `no operation ${id} in the contract` });
    const unfit = unfitPathParameter(route.path, input.path);
    // Refused here as the API refuses a malformed parameter (400, naming it), never sent elsewhere.
    if (unfit !== undefined) return Promise.resolve({ ok: false, status: 400, error: unfit });
    const raw = input.body instanceof Uint8Array;
    const init = {
      params: { path: input.path, query: input.query },
      ...(input.body !== undefined ? { body: input.body } : {}),
      ...(raw ? { bodySerializer: (b: unknown) => b, headers: { 'content-type': input.contentType ?? 'application/octet-stream' } } : {}),
      ...(how.once === true ? { fetch: baseFetch } : {}),
      ...(how.signal !== undefined ? { signal: how.signal } : {}),
    };
    const send = api[route.method] as unknown as (path: string, init: unknown) => Promise<{ data?: unknown; error?: unknown; response: Response }>;
    return run(() => send(route.path, init), how.keepBody === true);
  }

  return { call, request };
}

/** Every operationId of the contract Herald's package was generated from. */
export type OperationId = keyof operations;

/** What an operation takes: its path parameters, its query, its body (raw bytes where it takes a file). */
export interface CallInput<O> {
  readonly path?: O extends { parameters: { path?: infer X } } ? Exclude<X, undefined> : never;
  readonly query?: O extends { parameters: { query?: infer X } } ? Exclude<X, undefined> : never;
  readonly body?: O extends { requestBody?: infer B } ? JsonOf<Exclude<B, undefined>> : never;
  /** A raw body's media type (default application/octet-stream). */
  readonly contentType?: string;
}

/** What an operation answers when it succeeds (undefined for 204). */
export type CallOutput<O> = O extends { responses: infer R } ? { [S in keyof R]: S extends 200 | 201 | 202 ? JsonOf<R[S]> : S extends 204 ? undefined : never }[keyof R] : unknown;

type JsonOf<C> = C extends { content: { 'application/json': infer B } } ? B : C extends { content: Record<string, unknown> } ? Uint8Array : never;

/** An operation of a contract document given to the client (a module's own), untyped. */
export interface UntypedInput {
  readonly path?: Readonly<Record<string, string | number>>;
  readonly query?: Readonly<Record<string, unknown>>;
  readonly body?: unknown;
  readonly contentType?: string;
}

export interface CallOptions {
  /** Asked once, never retried. */
  readonly once?: boolean;
  /** A refusal carries its whole body. */
  readonly keepBody?: boolean;
  /**
   * Ends the call when its caller is gone (an MCP client that went away mid-call): only for reads,
   * such as the long polls of the wait tools. A write is always carried through, so the caller's
   * re-issue is answered as a replay.
   */
  readonly signal?: AbortSignal;
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** operationId → method and path, from the contract's documents (a repeated operationId: the first wins, as the API refuses the rest). */
function routesOf(documents: readonly Record<string, unknown>[]): Map<string, { method: Method; path: string }> {
  const routes = new Map<string, { method: Method; path: string }>();
  for (const doc of documents) {
    for (const [path, item] of Object.entries((doc['paths'] ?? {}) as Record<string, Record<string, { operationId?: string }>>)) {
      for (const [method, op] of Object.entries(item)) {
        const upper = method.toUpperCase();
        if (!['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].includes(upper) || typeof op?.operationId !== 'string' || routes.has(op.operationId)) continue;
        routes.set(op.operationId, { method: upper as Method, path });
      }
    }
  }
  return routes;
}

export type BridgeClient = ReturnType<typeof createBridgeClient>;

/**
 * Why a path's parameters cannot be sent as the one segment each names, if they cannot: one not
 * given (the path would carry `{name}` itself), an empty one (the segment vanishes), or `.` and
 * `..` (URL parsing removes them as dot segments, so `/x/{id}/stop` with `..`
 * is `/stop`: another operation). Anything else is escaped (encodeURIComponent: `/`, `?`, `#`,
 * `%` included) and stays one segment.
 */
function unfitPathParameter(template: string, given: UntypedInput['path']): string | undefined {
  for (const [, name = ''] of template.matchAll(/\{([^}]+)\}/g)) {
    const value = given?.[name];
    if (value === undefined) return `path parameter ${name} is missing`;
    if (/^(|\.|\.\.)$/.test(String(value))) return `path parameter ${name} must not be empty, . or ..`;
  }
  return undefined;
}

/** What the network said, from fetch's "fetch failed" down to the socket's error (ECONNREFUSED, ENOTFOUND, …). */
function networkCause(err: unknown): string {
  let deepest = 'no answer';
  for (let e: unknown = err, depth = 0; typeof e === 'object' && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { message, code } = e as { message?: unknown; code?: unknown };
    if (typeof message === 'string' && message !== '' && message !== 'fetch failed') deepest = message;
    else if (typeof code === 'string') deepest = code;
  }
  return deepest;
}
