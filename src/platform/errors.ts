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
/** A dependency (Discord) refused or could not be reached. */
export class UpstreamError extends DomainError {}

/** An error's kind and message, never request data: platform errors carry no content. */
export function errorSummary(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
