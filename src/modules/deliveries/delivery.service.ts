import type { Kysely } from 'kysely';
import type { Clock } from '../../platform/clock.js';
import type { Database } from '../../schema.js';
import { ConflictError, NotFoundError } from '../../platform/errors.js';
import { payloadHash, type Delivery, type DeliveryKind, type DeliveryState } from './delivery.js';
import { findDelivery, insertDelivery, lockDelivery, notifyDue, resetToPending } from './delivery.repository.js';
import type { DeliveryRow } from './delivery.table.js';

/** Which kinds the chat host can deliver at all (docs/protocol.md §2 capabilities). */
export type KindSupport = Readonly<Record<DeliveryKind, boolean>>;


export class DeliveryService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly support: KindSupport,
  ) {}

  /**
   * Store a delivery (idempotently) and answer with its state. Returns only after the commit, so a
   * 202 always means the delivery is durable.
   */
  async accept(delivery: Delivery): Promise<{ state: DeliveryState; existing: boolean }> {
    const now = this.clock.now();
    const hash = payloadHash(delivery);
    const supported = this.support[delivery.kind];
    return this.db.transaction().execute(async (trx) => {
      const inserted = await insertDelivery(trx, {
        request_id: delivery.request_id,
        kind: delivery.kind,
        target: JSON.stringify(delivery.target),
        body: JSON.stringify(delivery.body),
        payload_hash: hash,
        status: supported ? 'pending' : 'failed',
        failure_code: supported ? null : 'CAPABILITY_UNAVAILABLE',
        created_at: now,
        next_attempt_at: now,
      });
      if (inserted !== undefined) {
        if (supported) await notifyDue(trx);
        return { state: toDeliveryState(inserted, now), existing: false };
      }
      let row = await lockDelivery(trx, delivery.request_id);
      if (row === undefined) throw new Error('delivery vanished under its own row lock');
      if (row.payload_hash !== hash) throw new ConflictError('request_id was already used for a different request');
      const abandoned = row.status === 'in_flight' && isLeaseExpired(row, now);
      if (supported && (row.status === 'failed' || row.status === 'unknown' || abandoned)) {
        row = await resetToPending(trx, row.request_id, now);
        await notifyDue(trx);
      }
      return { state: toDeliveryState(row, now), existing: true };
    });
  }

  async get(requestId: string): Promise<DeliveryState> {
    const row = await findDelivery(this.db, requestId);
    if (row === undefined) throw new NotFoundError('unknown request_id');
    return toDeliveryState(row, this.clock.now());
  }
}

function isLeaseExpired(row: DeliveryRow, now: Date): boolean {
  return row.lease_expires_at !== null && row.lease_expires_at.getTime() <= now.getTime();
}

/** The wire view of a stored delivery (docs/protocol.md §5), keys in the protocol's order. */
export function toDeliveryState(row: DeliveryRow, now: Date): DeliveryState {
  const common = {
    kind: row.kind,
    target: row.target,
    body: row.body,
    created_at: row.created_at.toISOString(),
  };
  switch (row.status) {
    case 'pending':
      return { state: 'pending', ...common };
    case 'in_flight':
      return isLeaseExpired(row, now) ? { state: 'unknown', ...common } : { state: 'pending', ...common };
    case 'unknown':
      return { state: 'unknown', ...common };
    case 'failed':
      return { state: 'failed', ...common, code: row.failure_code ?? 'UPSTREAM_UNAVAILABLE' };
    case 'delivered': {
      const messageRef = row.kind === 'edit' && 'message_ref' in row.target ? row.target.message_ref : row.request_id;
      const delivered = { state: 'delivered' as const, ...common, message_ref: messageRef, url: row.url ?? '' };
      return row.kind === 'edit' ? { ...delivered, applied: row.applied ?? false } : delivered;
    }
  }
}
