import { errorSummary } from '../platform/errors.js';
import { TransportError, type TransportFailure } from '../transports/transport.js';

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
