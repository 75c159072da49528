import { errorSummary } from '../infra/errors.js';
import { TransportError } from './platform.js';

/**
 * A send of several parts fails as a whole call: once a part of this call went out, a later part's
 * failure leaves something created (the earlier parts), whatever that part's own failure says.
 * A transient failure is then rethrown with `mayHaveCreated`, so the next attempt proves what is
 * in the channel before sending; a refusal stays a refusal.
 */
export function partway(err: unknown, partsSent: boolean): never {
  if (!partsSent) throw err;
  if (!(err instanceof TransportError)) throw new TransportError({ kind: 'transient', detail: errorSummary(err), mayHaveCreated: true });
  if (err.failure.kind !== 'transient' || err.failure.mayHaveCreated === true) throw err;
  throw new TransportError({ ...err.failure, mayHaveCreated: true });
}
