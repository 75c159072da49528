import type { Kysely } from 'kysely';
import type { Clock } from '../../infra/clock.js';
import { fenceWhile, type Fence } from '../../infra/faults/fence.js';
import type { DeliveriesDb } from './delivery.table.js';
import { acquireEditLock, releaseEditLock, renewEditLock } from './delivery.repository.js';

/**
 * The edit lease on an original lasts this long unless its holder renews it (every fifth of it), so
 * an edit left by a killed process blocks the next one for seconds, not a whole delivery lease.
 */
const EDIT_LOCK_TTL_MS = 5_000;
/**
 * An edit lease that expired (its holder died or stalled) is taken over only this long after it
 * ended. The holder's edit left, if at all, before its lease ended (its fence); by then it has
 * landed, so the edit applied next, with the newest seq, is the one the message keeps. Taken over at
 * once, an older edit still on its way could land after a newer one.
 */
export const EDIT_TAKEOVER_SETTLE_MS = 5_000;

/** An edit lease held on an original, renewed while its edit is applied. */
export interface EditLease {
  /** The original's last applied seq when the lease was taken. */
  readonly lastAppliedSeq: number | null;
  /** The edit (its request id) that recorded it. */
  readonly lastAppliedBy: string | null;
  /** Aborted when the lease is lost (a renewal refused, or none answered within half the lease). */
  readonly lost: AbortSignal;
  /** Holds while the lease does, less a margin, on the monotonic clock: the edit leaves only under it. */
  readonly fence: Fence;
  /** Stop renewing and give the lease back. */
  release(): Promise<void>;
}

/**
 * Take the edit lease on an original so its edits apply one at a time across every process, and
 * keep it renewed; undefined when another edit holds it. `leaseMs` caps its length (the delivery's
 * own lease).
 */
export async function takeEditLease(db: Kysely<DeliveriesDb>, clock: Clock, originalId: string, holder: string, leaseMs: number): Promise<EditLease | undefined> {
  const ttl = Math.min(EDIT_LOCK_TTL_MS, leaseMs);
  const margin = Math.min(1_000, ttl / 4);
  // Held until `heldUntil` (monotonic), moved on by each renewal from when it was asked.
  let heldUntil = performance.now() + ttl;
  const lock = await acquireEditLock(db, originalId, holder, clock.now(), ttl, EDIT_TAKEOVER_SETTLE_MS);
  if (lock === undefined) return undefined;
  const lost = new AbortController();
  let renewedAt = performance.now();
  const renewal = setInterval(() => {
    // A renewal that is slow, fails or hangs counts as lost once half the lease has passed.
    if (performance.now() - renewedAt > ttl / 2) lost.abort();
    const asked = performance.now();
    renewEditLock(db, originalId, holder, clock.now(), ttl).then(
      (held) => {
        if (!held) return lost.abort();
        renewedAt = performance.now();
        heldUntil = asked + ttl;
      },
      () => undefined,
    );
  }, ttl / 5);
  return {
    lastAppliedSeq: lock.last_applied_seq,
    lastAppliedBy: lock.last_applied_by,
    lost: lost.signal,
    fence: fenceWhile(() => !lost.signal.aborted && performance.now() < heldUntil - margin, 'the edit lease'),
    release: async () => {
      clearInterval(renewal);
      await releaseEditLock(db, originalId, holder);
    },
  };
}
