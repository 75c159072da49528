import { OpenAPIBackend, type Document } from 'openapi-backend';
import { expect } from 'vitest';
import { withUtf16Lengths } from '../../src/infra/contract/ajv.js';
import { specDocument } from '../../src/infra/contract/spec.js';

let contract: Promise<OpenAPIBackend> | undefined;

/** The contract, for validating every response the tests see. */
export function contractApi(): Promise<OpenAPIBackend> {
  contract ??= (async () => {
    const api = new OpenAPIBackend({ definition: specDocument() as unknown as Document, quick: true, strict: true, ignoreTrailingSlashes: false, customizeAjv: (ajv) => withUtf16Lengths(ajv) });
    await api.init();
    return api;
  })();
  return contract;
}

export interface Res {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

export interface RequestOptions {
  token?: string | undefined;
  /** A JSON value to send, or a raw string body. */
  body?: unknown;
  raw?: string | Buffer;
  headers?: Record<string, string>;
}

/**
 * One HTTP request to a running Herald. Every answer is checked against the contract: JSON
 * content type, and the body valid for the matched operation and status (or the Error schema).
 */
export async function call(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<Res> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`;
  let body: string | Buffer | undefined;
  if (options.raw !== undefined) body = options.raw;
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${baseUrl}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  const result: Res = { status: res.status, headers: res.headers, text, json: undefined };
  expect(await answerProblems(method, path, res.status, res.headers.get('content-type'), text)).toEqual([]);
  if (method !== 'HEAD' && res.status !== 204) result.json = JSON.parse(text);
  return result;
}

export async function expectValidResponse(method: string, path: string, status: number, json: unknown): Promise<void> {
  expect(await contractProblems(method, path, status, json), `${method} ${path} ${status} ${JSON.stringify(json)}`).toEqual([]);
}

/**
 * What is wrong with an answer (none: []): HEAD and 204 have no body; anything else is JSON,
 * valid by the contract. Shared by the tests (through `call`) and the fuzzer.
 */
export async function answerProblems(method: string, path: string, status: number, contentType: string | null, text: string): Promise<string[]> {
  if (method === 'HEAD' || status === 204) return text === '' ? [] : [`${method} ${path} ${status}: expected no body, got ${text.slice(0, 200)}`];
  if (!/^application\/json/.test(contentType ?? '')) {
    // An answer the contract declares in another type (e.g. the archive's event stream) is that type.
    const operation = (await contractApi()).matchOperation({ method, path, headers: {} });
    const declared = Object.keys((operation?.responses?.[String(status)] as { content?: Record<string, unknown> } | undefined)?.content ?? {});
    if (declared.some((type) => type !== 'application/json' && (contentType ?? '').startsWith(type))) return [];
    return [`${method} ${path} ${status}: content type ${contentType ?? '(none)'}, not application/json`];
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return [`${method} ${path} ${status}: the body is not JSON: ${text.slice(0, 200)}`];
  }
  return contractProblems(method, path, status, json);
}

/**
 * What is wrong with a JSON answer by the contract: the matched operation declares the status and
 * the body is valid for it; a path the contract does not have answers `{"error":"<reason>"}`.
 */
export async function contractProblems(method: string, path: string, status: number, json: unknown): Promise<string[]> {
  const api = await contractApi();
  const operation = api.matchOperation({ method, path, headers: {} });
  if (operation === undefined) {
    const isError = typeof json === 'object' && json !== null && !Array.isArray(json) && Object.keys(json).join() === 'error' && typeof (json as { error: unknown }).error === 'string';
    return isError ? [] : [`${method} ${path} ${status}: expected an error body {"error":"…"}, got ${JSON.stringify(json).slice(0, 200)}`];
  }
  const declared = Object.keys(operation.responses ?? {});
  if (!declared.includes(String(status))) return [`${operation.operationId} does not declare status ${status}: ${JSON.stringify(json).slice(0, 200)}`];
  const result = api.validateResponse(json, operation, status);
  return (result.errors ?? []).map((e) => `${operation.operationId} ${status}: ${e.instancePath || '(body)'} ${e.message ?? 'is invalid'}: ${JSON.stringify(json).slice(0, 200)}`);
}

/** A client bound to one Herald and token. */
export function client(baseUrl: string, token: string | undefined) {
  return {
    get: (path: string, o: RequestOptions = {}) => call(baseUrl, 'GET', path, { token, ...o }),
    post: (path: string, body: unknown, o: RequestOptions = {}) => call(baseUrl, 'POST', path, { token, body, ...o }),
    put: (path: string, body: unknown, o: RequestOptions = {}) => call(baseUrl, 'PUT', path, { token, body, ...o }),
    delete: (path: string, o: RequestOptions = {}) => call(baseUrl, 'DELETE', path, { token, ...o }),
    call: (method: string, path: string, o: RequestOptions = {}) => call(baseUrl, method, path, { token, ...o }),
  };
}
export type Client = ReturnType<typeof client>;
