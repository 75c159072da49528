import { sql, type Kysely } from 'kysely';
import { ClaimCursor } from '../../outbox/leased-table.js';
import type { Job, JobQueue } from '../../outbox/worker.js';
import type { DeliveriesDb, DeliveryRow } from './delivery.table.js';
import { RETENTION_MS, type StoredKind } from './delivery.js';
import { claimDue, finishAttempt, oldestDueDelivery, outboxDepth, pruneDeliveries, releaseLeases, type DeliveryLanes } from './delivery.repository.js';
import type { DeliveryMetrics } from './delivery.metrics.js';

// The deliveries table as the outbox's queue: what is due, how a claim and a release are written,
// what a row that cannot succeed becomes, how deep it is, what is pruned. The job handlers are delivery.jobs.ts.

/**
 * The job kinds of the deliveries table: one per delivery kind, `reply` (a command's reply), and
 * `handoff` (a bot-to-bot handoff message, which the handoffs module stores here to share the
 * nonce and in-doubt machinery), and `chat` (a chat tool's send, declared by the chat module).
 */
export const DELIVERY_KINDS: readonly StoredKind[] = ['post', 'dm', 'edit', 'reply', 'handoff', 'chat', 'delete', 'reaction'];

/** A delivery row is its own outbox job. */
export interface DeliveryJob extends Job {
  readonly row: DeliveryRow;
}

/**
 * A claim slower than this asks for fresh statistics of the table (at most every
 * STATISTICS_EVERY_MS per process). The claim's twin checks are planned from them: planned from
 * statistics that saw no pending row (a quiet spell, then a burst), each twin check scanned every
 * pending row, and a claim with 500 due rows took 87 ms on PostgreSQL and 250 ms on PGlite instead
 * of 4 and 8 (measured in this process, the same rows before and after ANALYZE). PostgreSQL's
 * autovacuum analyzes a table only after a tenth of its rows changed, a burst in a table of a
 * week's deliveries never does, and PGlite has no autovacuum at all.
 */
export const SLOW_CLAIM_MS = 40;
export const STATISTICS_EVERY_MS = 30_000;

/** The outbox's view of the deliveries table. */
export function deliveryQueue(db: Kysely<DeliveriesDb>, metrics?: DeliveryMetrics, claimSweepMs = ClaimCursor.SWEEP_MS, lanes: DeliveryLanes = { pacedBySender: [], byIdentity: false }, claimsOverlap = true, slowClaimMs = SLOW_CLAIM_MS): JobQueue<DeliveryJob> {
  // Under a backlog, claims start past the rows already claimed (src/outbox/leased-table.ts).
  const cursor = new ClaimCursor(claimSweepMs);
  let analyzedAt = -Infinity;
  let analyzing: Promise<void> | undefined;
  const refreshStatistics = (): void => {
    if (analyzing !== undefined || performance.now() - analyzedAt < STATISTICS_EVERY_MS) return;
    analyzedAt = performance.now();
    // Not awaited by the claim; a store that is closing or gone just leaves the old statistics.
    analyzing = sql`analyze deliveries`
      .execute(db)
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => (analyzing = undefined));
  };
  return {
    // `lanes`: what gives a row a lane (DeliveryLanes, src/outbox/lanes.ts);
    // `claimsOverlap`: false on a store of one session (claimDue's ClaimOptions).
    claim: async (owner, now, leaseMs, kinds, limit, room) => {
      const started = performance.now();
      const claimed = await claimDue(db, owner, now, leaseMs, kinds as StoredKind[], limit, { cursor, claimsOverlap, ...(room !== undefined && (lanes.pacedBySender.length > 0 || lanes.byIdentity) ? { lanes: { room, rule: lanes } } : {}) });
      if (performance.now() - started > slowClaimMs) refreshStatistics();
      return claimed.map(({ claimed_from, lane, ...row }) => {
        if (claimed_from === 'in_flight') metrics?.leaseExpired(row.kind);
        return { id: row.request_id, kind: row.kind, attempts: row.attempts, leaseToken: row.lease_token, row, ...(typeof lane === 'string' ? { lane } : {}) };
      });
    },
    name: 'deliveries',
    oldestDue: (now) => oldestDueDelivery(db, now),
    release: (owner, now) => releaseLeases(db, owner, now),
    // A row whose handling cannot succeed: failed, or unknown when an earlier attempt may have sent it (never resent blind).
    quarantine: (job, lease, reason) => finishAttempt(db, job.id, lease, { status: job.row.doubt_from !== null ? 'unknown' : 'failed', failure_code: job.row.doubt_from !== null ? null : 'UPSTREAM_UNAVAILABLE', reason }),
    depth: async (now) =>
      (await outboxDepth(db, now)).map((r) => ({ kind: r.kind, state: r.status, jobs: r.jobs, oldestDueAt: r.oldest_due_at })),
    // Records are kept 8 days (by created_at).
    prune: (now) => pruneDeliveries(db, new Date(now.getTime() - RETENTION_MS)),
  };
}

