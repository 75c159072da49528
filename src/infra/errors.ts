/** Domain errors carry the protocol's reason; the HTTP layer alone maps them to statuses. */
export class DomainError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = new.target.name;
  }
}
/** The request does not satisfy the contract. */
export class InvalidRequestError extends DomainError {}
/** The thing asked for does not exist. */
export class NotFoundError extends DomainError {}
/** The request contradicts what is already stored. */
export class ConflictError extends DomainError {}
/** A dependency (a platform Herald speaks to) refused or could not be reached. */
export class UpstreamError extends DomainError {}

/**
 * An error's kind and message, never request data: platform errors carry no content. An HTTP
 * error from a dependency (a platform client's API error) also names its status and code, which
 * its message alone may not (e.g. "Missing Access").
 */
export function errorSummary(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const { status, code } = err as { status?: unknown; code?: unknown };
  const http = typeof status === 'number' ? ` (status ${status}${typeof code === 'number' || typeof code === 'string' ? `, code ${code}` : ''})` : '';
  return `${err.name}: ${err.message}${http}`;
}

/** Whether the client caused an error Koa reports: it went away, or its request was malformed (a 4xx). */
export function clientCaused(err: unknown): boolean {
  const { status, code } = (typeof err === 'object' && err !== null ? err : {}) as { status?: unknown; code?: unknown };
  return (typeof status === 'number' && status < 500) || code === 'ECONNRESET' || code === 'ECONNABORTED' || (typeof code === 'string' && code.startsWith('HPE_'));
}
