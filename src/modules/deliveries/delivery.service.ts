import { createHash } from 'node:crypto';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import type { Kysely } from 'kysely';
import type { Clock } from '../../infra/clock.js';
import type { DeliveriesDb } from './delivery.table.js';
import { ConflictError, NotFoundError } from '../../infra/errors.js';
import { isLeaseExpired, payloadHash, type Delivery, type DeliveryDetail, type DeliveryKind, type DeliveryState, type MessageBody, type Reply, type StoredKind, type Target } from './delivery.js';
import { GroupCommit } from '../../infra/db/group-commit.js';
import { isStoreUnavailable } from '../../infra/db/database.js';
import { findDeliveries, insertDeliveries, lockDelivery, resetToPending, type InsertOutcome } from './delivery.repository.js';
import type { DeliveryRow, NewDeliveryRow } from './delivery.table.js';

/** Which kinds the chat host can deliver at all (docs/protocol.md §2 capabilities). */
export type KindSupport = Readonly<Record<'post' | 'dm' | 'edit', boolean>> & Readonly<Partial<Record<'delete' | 'reaction', boolean>>>;


export interface AcceptOptions {
  /** Rung after a commit made a delivery due (wakes the dispatchers). */
  announce?: () => void;
  /** Insert statements in flight at once (group commit); 1 on a single-session store. */
  maxInFlight?: number;
}

export const REUSED_ID = 'request_id was already used for a different request';

/** A row to store idempotently under its request_id (a delivery, or another module's message, e.g. a handoff). */
export interface PreparedDelivery {
  request_id: string;
  kind: StoredKind;
  target: Target;
  body: MessageBody;
  /** Canonical hash of what was asked for: the same request_id for something else is refused. */
  hash: string;
  /** False: stored failed CAPABILITY_UNAVAILABLE at once, never attempted. */
  supported: boolean;
  /** False: a repeat answers the stored row as it is, never making a failed one due again (chat sends). */
  redrive?: boolean;
  /** The identity it is sent as (src/infra/policy/identity.ts); absent: the default. */
  identity?: string | undefined;
}

/** A new row (created now), or the one already stored under that request_id (reset when it needed a retry). */
export type StoreOutcome = { existing: false; createdAt: Date } | { existing: true; row: DeliveryRow; redriven: boolean };

/** How often an accept's statement is sent again after its session was lost (then: 503). */
const LOST_SESSION_RESENDS = 2;
/** Most deliveries one group-commit statement inserts. */
const MAX_BATCH = 256;

export class DeliveryService {
  private readonly intake: GroupCommit<NewDeliveryRow, InsertOutcome>;
  /** Reads by request_id: those arriving while others are being read are read together. */
  private readonly reads: GroupCommit<string, DeliveryRow | undefined>;
  private readonly announce: () => void;

  constructor(
    private readonly db: Kysely<DeliveriesDb>,
    private readonly clock: Clock,
    private readonly support: KindSupport,
    options: AcceptOptions = {},
  ) {
    this.announce = options.announce ?? (() => undefined);
    this.intake = new GroupCommit({
      commit: (rows) => insertDeliveries(db, rows),
      maxInFlight: options.maxInFlight ?? 4,
      maxBatch: MAX_BATCH,
      isFatal: isStoreUnavailable,
    });
    // The same gathering for reads (a GET of a delivery): under load one statement answers many
    // requests, each read begun after its request arrived; an idle store reads at once, alone.
    this.reads = new GroupCommit({
      commit: (ids) => findDeliveries(db, ids),
      maxInFlight: options.maxInFlight ?? 4,
      maxBatch: MAX_BATCH,
      isFatal: isStoreUnavailable,
    });
  }

  /**
   * Store a delivery (idempotently) and answer with its state. Returns only after the commit, so a
   * 202 always means the delivery is durable. A new delivery is one autocommit INSERT, shared with
   * the accepts arriving meanwhile (group commit); a repeat is answered by the same statement's
   * unlocked read, and only a repeat that resets a failed or unknown delivery takes a row lock.
   */
  async accept(delivery: Delivery, identity: string = DEFAULT_IDENTITY): Promise<{ state: DeliveryState; existing: boolean; redriven?: boolean }> {
    // A kind added later (delete, reaction) that the wiring does not name is supported; the send says where not.
    const supported = this.support[delivery.kind] ?? true;
    const stored = await this.store({ request_id: delivery.request_id, kind: delivery.kind, target: delivery.target, body: delivery.body, hash: identityHash(payloadHash(delivery), identity), supported, identity });
    if (stored.existing) return { state: toDeliveryState(stored.row, this.clock.now()), existing: true, ...(stored.redriven ? { redriven: true } : {}) };
    // What the stored row reads back as (toDeliveryState), without reading it back.
    const common = { kind: delivery.kind, target: delivery.target, body: delivery.body, created_at: stored.createdAt.toISOString() };
    const state: DeliveryState = supported ? { state: 'pending', ...common } : { state: 'failed', ...common, code: 'CAPABILITY_UNAVAILABLE' };
    return { state, existing: false };
  }

  /**
   * Queue a command's reply to its channel, exactly once per request_id, like a post: the same id
   * again is the delivery already queued (re-driven if it failed), never a second message.
   */
  async enqueueReply(reply: Reply): Promise<{ existing: boolean }> {
    const stored = await this.store({ ...reply, hash: payloadHash(reply), supported: this.support.post });
    return { existing: stored.existing };
  }

  /**
   * Store a row idempotently under its request_id; the outbox then sends it. Returns only after the
   * commit. A new row is one autocommit INSERT, shared with the accepts arriving meanwhile (group
   * commit); a repeat is answered by that same statement's unlocked read of the stored row, and only
   * a repeat that resets a failed or unknown row takes a row lock. The same request_id with another hash is refused (422).
   */
  async store(prepared: PreparedDelivery): Promise<StoreOutcome> {
    const now = this.clock.now();
    const { hash, supported } = prepared;
    let resent = 0;
    for (;;) {
      let inserted: InsertOutcome;
      try {
        inserted = await this.intake.submit({
          request_id: prepared.request_id,
          kind: prepared.kind,
          target: JSON.stringify(prepared.target),
          body: JSON.stringify(prepared.body),
          payload_hash: hash,
          status: supported ? 'pending' : 'failed',
          failure_code: supported ? null : 'CAPABILITY_UNAVAILABLE',
          created_at: now,
          next_attempt_at: now,
          identity: prepared.identity === undefined || prepared.identity === DEFAULT_IDENTITY ? null : prepared.identity,
        });
      } catch (err) {
        // A server restart or failover ends every pooled session, and the pool may hand one out
        // before it has noticed: the statement is sent again on another (the insert is idempotent).
        if (!isStoreUnavailable(err) || resent >= LOST_SESSION_RESENDS) throw err;
        resent += 1;
        continue;
      }
      if (inserted === true) {
        if (supported) this.announce();
        return { existing: false, createdAt: now };
      }
      // The statement read the row it could not insert; none: another session's insert of this id
      // committed after the statement began (or a twin in its batch inserted it): insert again.
      const row = inserted;
      if (row === undefined) continue;
      if (row.payload_hash !== hash) throw new ConflictError(REUSED_ID);
      // This call's own insert, committed before its answer was lost: the row has this call's time.
      if (resent > 0 && row.created_at.getTime() === now.getTime()) {
        if (supported) this.announce();
        return { existing: false, createdAt: now };
      }
      if (!(supported && prepared.redrive !== false && needsReset(row, now))) return { existing: true, row, redriven: false };
      return this.resetForRetry(prepared.request_id, hash, supported, now);
    }
  }

  /** A repeat of a failed, unknown or abandoned delivery: make it due again, under its row lock. */
  private async resetForRetry(requestId: string, hash: string, supported: boolean, now: Date): Promise<StoreOutcome> {
    let reset = false;
    const row = await this.db.transaction().execute(async (trx) => {
      let locked = await lockDelivery(trx, requestId);
      if (locked === undefined) throw new Error('delivery vanished under its own row lock');
      if (locked.payload_hash !== hash) throw new ConflictError(REUSED_ID);
      if (supported && needsReset(locked, now)) {
        locked = await resetToPending(trx, locked.request_id, now);
        reset = true;
      }
      return locked;
    });
    if (reset) this.announce();
    return { existing: true, row, redriven: reset };
  }

  /** A stored row by request_id, whatever its kind (handoffs read theirs). */
  find(requestId: string): Promise<DeliveryRow | undefined> {
    return this.reads.submit(requestId);
  }

  /** A delivery's state, as `identity` (the caller's) sees it: another identity's deliveries are not found. */
  async get(requestId: string, identity: string = DEFAULT_IDENTITY): Promise<DeliveryState> {
    const row = await this.reads.submit(requestId);
    // Only the protocol's kinds: another module's rows (a command's reply, a handoff, a chat send, one added later) are not deliveries.
    if (row === undefined || !WIRE_KINDS.has(row.kind) || (row.identity ?? DEFAULT_IDENTITY) !== identity) throw new NotFoundError('unknown request_id');
    return toDeliveryState(row, this.clock.now());
  }

  /** An operator's view of one delivery: state, code, reason, attempts, where it went; never its body. */
  async detail(requestId: string, identity?: string): Promise<DeliveryDetail> {
    const row = await this.reads.submit(requestId);
    // Operators see replies here too; a handoff's state is the handoffs module's (GET /mcp/handoffs/{id}),
    // a chat send's the chat module's (GET /mcp/chat/messages/{id}). Asked as an identity: its own only.
    if (row === undefined || !(WIRE_KINDS.has(row.kind) || row.kind === 'reply')) throw new NotFoundError('unknown request_id');
    if (identity !== undefined && (row.identity ?? DEFAULT_IDENTITY) !== identity) throw new NotFoundError('unknown request_id');
    return toDeliveryDetail(row, this.clock.now());
  }
}

/**
 * The hash a delivery is stored under, as `identity` asked for it: the default's is the payload's
 * alone (as every delivery's was before identities), another's binds its name in, so the same
 * request_id from a caller speaking as another identity is refused as a reuse (422), never answered
 * with the other's delivery.
 */
export function identityHash(hash: string, identity: string): string {
  return identity === DEFAULT_IDENTITY ? hash : createHash('sha256').update(`${hash}\n${identity}`).digest('hex');
}

/**
 * The kinds `GET /mcp/deliveries/{request_id}` shows: the protocol's own, an allow-list (a record
 * over the contract's DeliveryKind, so a kind the contract adds must be named here), never another
 * module's rows that share the outbox.
 */
const WIRE_KINDS: ReadonlySet<string> = new Set(Object.keys({ post: true, dm: true, edit: true, delete: true, reaction: true } satisfies Record<DeliveryKind, true>));

/** Optional keys are left out rather than null (`exactOptionalPropertyTypes`). */
export function toDeliveryDetail(row: DeliveryRow, now: Date): DeliveryDetail {
  const wire = toDeliveryState(row, now).state;
  const detail: DeliveryDetail = {
    request_id: row.request_id,
    kind: row.kind as DeliveryDetail['kind'],
    state: row.status === 'in_flight' && wire === 'pending' ? 'in_flight' : wire,
    target: row.target as DeliveryDetail['target'],
    attempts: row.attempts,
    created_at: row.created_at.toISOString(),
  };
  if (row.attempt_started_at !== null) detail.last_attempt_at = row.attempt_started_at.toISOString();
  if (row.status === 'pending') detail.next_attempt_at = row.next_attempt_at.toISOString();
  if (row.status === 'failed') detail.code = row.failure_code ?? 'UPSTREAM_UNAVAILABLE';
  if (row.reason !== null) detail.reason = row.reason;
  else if (wire === 'unknown' && row.status === 'in_flight') detail.reason = 'the dispatcher attempting it stopped before its lease ended; it is re-driven automatically';
  if (row.transport !== null) detail.transport = row.transport;
  if (row.channel_id !== null) detail.channel_id = row.channel_id;
  if (row.message_id !== null) detail.message_id = row.message_id;
  if (row.url !== null && row.status === 'delivered') detail.url = row.url;
  return detail;
}

/** Failed, unknown, or in flight under a lease that expired (its dispatcher died). */
function needsReset(row: DeliveryRow, now: Date): boolean {
  return row.status === 'failed' || row.status === 'unknown' || (row.status === 'in_flight' && isLeaseExpired(row, now));
}

/** The wire view of a stored delivery (docs/protocol.md §5), keys in the protocol's order. */
export function toDeliveryState(row: DeliveryRow, now: Date): DeliveryState {
  // A reply has the same states; only operators see it, through toDeliveryDetail. Handoffs never reach here.
  const common = {
    kind: row.kind as DeliveryKind,
    target: row.target as DeliveryState['target'],
    body: row.body,
    created_at: row.created_at.toISOString(),
  };
  switch (row.status) {
    case 'pending':
      return { state: 'pending', ...common };
    case 'in_flight':
      return isLeaseExpired(row, now) ? { state: 'unknown', ...common } : { state: 'pending', ...common };
    case 'unknown':
    case 'unconfirmed':
      return { state: 'unknown', ...common };
    case 'failed':
      return { state: 'failed', ...common, code: row.failure_code ?? 'UPSTREAM_UNAVAILABLE' };
    case 'delivered': {
      // An edit, a delete or a reaction names the message it acted on (a reaction by message_id: its own).
      const messageRef = (row.kind === 'edit' || row.kind === 'delete' || row.kind === 'reaction') && 'message_ref' in row.target ? row.target.message_ref : row.request_id;
      const delivered = { state: 'delivered' as const, ...common, message_ref: messageRef, url: row.url ?? '' };
      return row.kind === 'edit' ? { ...delivered, applied: row.applied ?? false } : delivered;
    }
  }
}
