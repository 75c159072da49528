import { errorSummary } from '../infra/errors.js';
import { isStoreUnavailable } from '../infra/db/database.js';
import { TransportError, type TransportFailure } from '../platforms/platform.js';

/**
 * What an attempt that failed does next, for every kind of job: the one rule.
 * - `failed`: refused for good, or out of attempts with nothing in doubt.
 * - `retry`: a transient failure with attempts left (at `retryAt`, the kind's backoff).
 * - `final_check`: out of attempts, but something may have been created: one more claim only looks.
 * - `in_doubt`: past that last look, still unsure: reported unknown (never failed).
 */
export type FailureVerdict =
  | { next: 'failed'; failure: TransportFailure; exhausted: boolean }
  | { next: 'retry'; failure: TransportFailure }
  | { next: 'final_check'; failure: TransportFailure }
  | { next: 'in_doubt'; failure: TransportFailure };

/** A thrown error as a platform failure: a TransportError's own, anything else transient. */
export function failureOf(err: unknown): TransportFailure {
  return err instanceof TransportError ? err.failure : { kind: 'transient', detail: errorSummary(err) };
}

/**
 * Decide after a failed attempt. `attempts` counts this one; `inDoubt`: a create may have happened
 * (this attempt's or an earlier one's) and is not settled.
 */
export function afterFailure(err: unknown, attempts: number, maxAttempts: number, inDoubt = false): FailureVerdict {
  const failure = failureOf(err);
  if (failure.kind !== 'transient') return { next: 'failed', failure, exhausted: false };
  if (attempts < maxAttempts) return { next: 'retry', failure };
  if (!inDoubt) return { next: 'failed', failure, exhausted: true };
  return attempts === maxAttempts ? { next: 'final_check', failure } : { next: 'in_doubt', failure };
}

/**
 * Whether a job's handler threw for a reason that is the row's own: its content cannot be read or
 * handled (a PostgreSQL data exception, SQLSTATE class 22, such as a `\u0000` its json cannot turn
 * into text; a JavaScript SyntaxError, TypeError or RangeError on what the row holds), not the
 * store's or the platform's (a lost connection, a timeout, a shutdown). Such a row would throw on
 * every attempt: it is quarantined, not retried in front of the others.
 */
export function isRowsOwnFault(err: unknown): boolean {
  if (!(err instanceof Error) || isStoreUnavailable(err)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code.startsWith('22');
  // undici's fetch says a network failure with a TypeError: the platform's, not the row's.
  if (err instanceof TypeError && err.message === 'fetch failed') return false;
  return err instanceof SyntaxError || err instanceof TypeError || err instanceof RangeError;
}

/** What went wrong, in words that never repeat the row's content (a JSON.parse error quotes the text it read). */
export function faultName(err: unknown): string {
  if (!(err instanceof Error)) return typeof err;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? `${err.name} (SQLSTATE ${code})` : err.name;
}
