import { OpenAPIBackend, type Document } from 'openapi-backend';
import { expect } from 'vitest';
import { withUtf16Lengths } from '../../src/contract/ajv.js';
import { specDocument } from '../../src/contract/spec.js';

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
  if (method === 'HEAD' || res.status === 204) {
    expect(text).toBe('');
    return result;
  }
  expect(res.headers.get('content-type'), `${method} ${path} content type`).toMatch(/^application\/json/);
  result.json = JSON.parse(text);
  await expectValidResponse(method, path, res.status, result.json);
  return result;
}

export async function expectValidResponse(method: string, path: string, status: number, json: unknown): Promise<void> {
  const api = await contractApi();
  const operation = api.matchOperation({ method, path, headers: {} });
  if (operation === undefined) {
    expect(json, `${method} ${path}: an error body`).toEqual({ error: expect.any(String) });
    return;
  }
  const declared = Object.keys(operation.responses ?? {});
  expect(declared, `${operation.operationId} declares status ${status}`).toContain(String(status));
  const result = api.validateResponse(json, operation, status);
  expect(result.errors ?? [], `${operation.operationId} ${status} ${JSON.stringify(json)}`).toEqual([]);
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
