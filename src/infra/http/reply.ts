import type { components, operations } from '../../../generated/api.js';

/** What a handler answers: status, JSON body, headers. */
export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** The JSON body of response `S` of operation `Op`, as the contract types it. */
type Json<Op extends keyof operations, S extends keyof operations[Op]['responses']> = operations[Op]['responses'][S] extends {
  content: { 'application/json': infer B };
}
  ? B
  : never;
type ErrorJson<R extends keyof components['responses']> = components['responses'][R] extends { content: { 'application/json': infer B } } ? B : never;

/** A reply typed by the contract: a body the operation does not declare for that status fails tsc. */
export function reply<Op extends keyof operations, S extends keyof operations[Op]['responses'] & number>(_op: Op, status: S, body: Json<Op, S>): Reply {
  return { status, body };
}

/** A reply with one of the contract's shared error responses. */
export function errorReply<R extends keyof components['responses']>(status: number, body: ErrorJson<R>, headers?: Record<string, string>): Reply {
  return { status, body, ...(headers ? { headers } : {}) };
}
