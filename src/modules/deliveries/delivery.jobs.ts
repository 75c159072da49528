import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { afterFailure, failureOf } from '../../outbox/failure-rule.js';
import type { JobContext, JobKind, Lease } from '../../outbox/worker.js';
import { faultPoint } from '../../infra/faults/fault-points.js';
import { LeaseLostError, withFence } from '../../infra/faults/fence.js';
import { takeEditLease } from './delivery.edit-lease.js';
import type { Clock } from '../../infra/clock.js';
import { retryWhileUnreachable } from '../../infra/db/database.js';
import { errorSummary } from '../../infra/errors.js';
import { TransportError, type Address, type Mentions, type SentMessage, type Platform, type TransportName, type Platforms } from '../../platforms/platform.js';
import type { DeliveriesDb } from './delivery.table.js';
import { deliveryNonce, type DeleteTarget, type DmTarget, type EditTarget, type ReactionTarget } from './delivery.js';
import { deletedByHerald, findDelivery, findRecentOfKind, finishAttempt, POSTING_KINDS, recordAppliedSeq, recordSentMessage } from './delivery.repository.js';
import { reconcile, RECONCILE_SETTLE_MS, TWIN_WAIT_MS, type Doubt } from './delivery.reconcile.js';
import { DESTINATION_UNMAPPED, dmKind, notRegisteredWith, postKind } from './delivery.kinds.js';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import { facet, type DeliveryPorts, type SelfSendingKind, type SendKind } from './send-kind.js';
import { deliverDelete, deliverReaction, isOwnMessage, type MessageOpContext } from './delivery.message-ops.js';
import type { DeliveryMetrics } from './delivery.metrics.js';
import { withAttachmentBytes } from './delivery.attachments.js';
import type { DeliveryRow, DeliveryUpdate } from './delivery.table.js';

export interface DeliveryJobOptions {
  nonceWindowMs: number;
  maxAttempts: number;
  retryBaseMs: number;
  leaseMs: number;
}

// The outbox's view of the deliveries table lives in delivery.queue.ts; re-exported for the callers that import it from here.
export { DELIVERY_KINDS, deliveryQueue, type DeliveryJob } from './delivery.queue.js';
import { DELIVERY_KINDS, type DeliveryJob } from './delivery.queue.js';

type Outcome = Pick<DeliveryUpdate, 'transport' | 'status' | 'failure_code' | 'channel_id' | 'message_id' | 'message_ids' | 'url' | 'next_attempt_at' | 'applied' | 'attempts' | 'reason'>;

/** A self-sending kind's proof could not tell whether an in-doubt attempt sent it. */
const SELF_SEND_UNDECIDED = 'an earlier attempt may have sent it, and the platform cannot tell whether it did';
/** How soon a job another replica must send (it holds the connection) is due again. */
const HELD_ELSEWHERE_RETRY_MS = 200;
/**
 * How long after it was stored a job another replica must send is put back without spending an
 * attempt: time enough for the holder's dispatcher to take it, or for another replica to take the
 * connection over from a holder that died. Past it, that is an ordinary transient failure (attempts,
 * backoff, then failed, or unknown when in doubt), never a job bouncing between replicas for good.
 */
export const HELD_ELSEWHERE_FREE_MS = 60_000;
/** How soon an edit retries when another edit of the same message is being applied. */
const EDIT_BUSY_RETRY_MS = 100;
/** One attempt at one delivery; `doubt` is what the attempt knows, written back with its outcome. */
interface Attempt {
  row: DeliveryRow;
  signal: AbortSignal;
  log: Logger;
  doubt: Doubt | undefined;
  /** The worker holding the lease. */
  owner: string;
  /** The platform the in-doubt create went to (null: the one the target names). */
  doubtTransport: TransportName | null;
  /** Set just before a create goes out: where it went. */
  creatingIn?: string;
  /** The platform this attempt sends with. */
  sendingWith?: TransportName;
  /** The platforms as the delivery's identity speaks them (Platforms.as). */
  platforms: Platforms;
  /** No platform here has the delivery's identity: it is refused, nothing is sent. */
  unconfigured?: true;
  /** Refused before the target resolved to any place (a destination mapped to nothing, a message gone). */
  nowhere?: true;
}

/**
 * The deliveries module's job handlers (post, dm, edit) for the outbox worker: each attempt sends
 * with a nonce derived from the request_id, settles a delivery in doubt before sending again, and
 * records the outcome only while the worker still holds the lease.
 */
export class DeliveryJobs {
  constructor(
    private readonly db: Kysely<DeliveriesDb>,
    private readonly transports: Platforms,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly metrics: DeliveryMetrics,
    private readonly options: DeliveryJobOptions,
    /** What the engine asks other modules (destinations, identity). */
    private readonly ports: DeliveryPorts,
  ) {}

  /** Send kinds by name: post and dm are this module's; others are declared by their owners. */
  private readonly sendKinds = new Map<string, SendKind<unknown>>([
    [postKind.kind, postKind as SendKind<unknown>],
    [dmKind.kind, dmKind as SendKind<unknown>],
  ]);

  /** A platform by name, as the attempt's identity; one this process does not speak (so) is a refusal for good. */
  private transport(at: Attempt, name: TransportName): Platform {
    const t = at.platforms.get(name);
    if (t !== undefined) return t;
    const identity = at.row.identity;
    throw new TransportError({ kind: 'rejected', detail: identity !== null && this.transports.get(name) !== undefined ? `identity ${identity} is not configured on ${name}` : `transport ${name} is not configured` });
  }

  /** The job kinds this module registers with the outbox worker. */
  kinds(): JobKind<DeliveryJob>[] {
    const retry = { maxAttempts: this.options.maxAttempts, baseMs: this.options.retryBaseMs };
    return DELIVERY_KINDS.map((kind) => ({ kind, retry, handle: (job: DeliveryJob, context: JobContext) => this.attempt(job.row, context) }));
  }

  private async attempt(row: DeliveryRow, context: JobContext): Promise<void> {
    const { signal } = context;
    const log = this.log.child({ request_id: row.request_id, kind: row.kind, attempt: row.attempts });
    const started = row.attempt_started_at ?? this.clock.now();
    const declared = this.sendKinds.get(row.kind);
    const selfSending = declared !== undefined && 'send' in declared;
    // A self-sending kind's reason reaches its caller (chat on any platform): it names no platform.
    // Others name the one the attempt sent with (or its doubt's; not yet known: the home one), as people call it.
    const named = (): string => {
      const name = at.sendingWith ?? at.doubtTransport ?? this.transports.home.name;
      return selfSending ? 'the platform' : (this.transports.get(name)?.title ?? name);
    };
    // One in-doubt rule for every kind: a doubt an earlier attempt recorded (or a claim recorded
    // for an attempt whose process died mid-send) is settled before anything is sent again.
    const doubt = row.doubt_from !== null ? { from: row.doubt_from, until: row.doubt_until ?? row.doubt_from, channelId: row.doubt_channel_id } : undefined;
    // Sent as the identity the caller spoke as, or not at all (deliver refuses it when no platform here has it).
    const platforms = row.identity === null ? this.transports : this.transports.as(row.identity);
    const at: Attempt = { row, signal, log, doubt, owner: context.owner, doubtTransport: row.transport, platforms: platforms ?? this.transports, ...(platforms === undefined ? { unconfigured: true } : {}) };
    let outcome: Outcome;
    try {
      outcome = await this.deliver(at);
      // Between the platform's answer and the commit: the chaos campaign may stall the process here.
      faultPoint('after-answer');
    } catch (err) {
      // Stalled past the lease: nothing left and nothing is written (the worker logs it).
      if (err instanceof LeaseLostError) throw err;
      const failure = failureOf(err);
      if (failure.kind === 'transient' && failure.mayHaveCreated === true && at.creatingIn !== undefined) {
        // The create may have happened: from this attempt's start until now, in that channel.
        at.doubt = { from: at.doubt?.from ?? started, until: this.clock.now(), channelId: at.creatingIn };
        log.warn({ detail: failure.detail, transport: at.sendingWith }, `create may have reached ${at.sendingWith ?? 'the platform'} unanswered; the delivery is in doubt`);
      }
      const verdict = afterFailure(err, row.attempts, context.retry.maxAttempts, at.doubt !== undefined);
      const heldElsewhere = failure.kind === 'transient' && failure.heldElsewhere === true;
      if (heldElsewhere && this.clock.now().getTime() - row.created_at.getTime() < HELD_ELSEWHERE_FREE_MS) {
        // Nothing was sent: another replica holds the connection this needs. Back in the queue at
        // once, without spending an attempt, for the holder's dispatcher to take.
        outcome = { status: 'pending', next_attempt_at: new Date(this.clock.now().getTime() + HELD_ELSEWHERE_RETRY_MS), attempts: row.attempts - 1 };
        log.debug('delivery left to the replica holding its connection');
      } else if (verdict.next === 'failed' && !verdict.exhausted) {
        outcome = { status: 'failed', failure_code: failure.kind === 'recipient_unreachable' ? 'RECIPIENT_UNREACHABLE' : 'UPSTREAM_UNAVAILABLE', reason: failure.detail };
        log.warn({ detail: failure.detail, transport: at.sendingWith }, `delivery rejected by ${at.sendingWith ?? 'the platform'}`);
      } else if (verdict.next === 'retry') {
        // A delivery in doubt is looked for next time, once its doubt window has settled.
        const next = context.retryAt(failure.kind === 'transient' ? failure.retryAfterMs : undefined);
        outcome = { status: 'pending', next_attempt_at: next, ...(selfSending ? { reason: failure.detail } : {}) };
        log.info({ detail: failure.detail, retry_in_ms: next.getTime() - this.clock.now().getTime() }, 'delivery will be retried');
        this.metrics.retry(row.kind);
      } else {
        if (verdict.next === 'failed') {
          outcome = { status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE', reason: `attempts exhausted (${failure.detail})` };
        } else if (verdict.next === 'final_check' && at.doubt !== undefined) {
          // Out of attempts, but a create may have happened: one more claim only looks (never sends),
          // once the doubt window has settled, and fails only if the channel shows nothing was created.
          outcome = { status: 'pending', next_attempt_at: new Date(at.doubt.until.getTime() + RECONCILE_SETTLE_MS), reason: 'final check of an in-doubt delivery' };
        } else {
          outcome = { status: 'unknown', reason: `unconfirmed: a create may have reached ${named()} and channel history could not be read (${failure.detail})` };
        }
        log.warn({ detail: failure.detail, state: outcome.status }, 'delivery gave up after its last attempt');
      }
    }
    if (outcome.status === 'failed' && at.nowhere === true && at.doubt?.channelId === null) {
      // A doubt with no channel is one a process that died mid-attempt left: it stands for where
      // the target resolves to, and the target resolves nowhere, so nothing is in doubt. Kept, it
      // would end every re-drive and re-POST `unknown`, for ever.
      at.doubt = undefined;
    }
    if (outcome.status === 'failed' && at.doubt !== undefined) {
      // Failing now would claim nothing was sent, yet an earlier create may have been.
      outcome = { status: 'unknown', reason: `${outcome.failure_code ?? 'failed'} (${outcome.reason ?? 'rejected'}) after a create that may have reached ${named()}` };
    }
    const resolved = outcome.status === 'delivered' ? undefined : at.doubt;
    const recorded = await this.record(row, context.lease, {
      ...outcome,
      reason: outcome.reason ?? null,
      doubt_from: resolved?.from ?? null,
      doubt_until: resolved?.until ?? null,
      doubt_channel_id: resolved?.channelId ?? null,
      ...(resolved !== undefined ? { transport: at.sendingWith ?? at.doubtTransport } : {}),
    });
    if (!recorded) {
      this.metrics.leaseLost(row.kind);
      // What this stale attempt knows is kept where the new holder's proof reads first: the message
      // its create made, under the delivery's nonce (the first report wins), so it is found, never sent again.
      if (outcome.status === 'delivered' && !selfSending && POSTING_KINDS.includes(row.kind) && typeof outcome.channel_id === 'string' && typeof outcome.message_id === 'string') {
        await recordSentMessage(this.db, deliveryNonce(row.request_id), outcome.channel_id, outcome.message_id, this.clock.now()).catch((err: unknown) => log.warn({ err: errorSummary(err) }, 'could not keep the message a stale attempt created'));
        log.warn('lease lost before the outcome was recorded; the message it created is kept for the new holder, which re-drives it');
        return;
      }
      log.warn('lease lost before the outcome was recorded; the new holder re-drives it');
      return;
    }
    if (outcome.status === 'delivered' || outcome.status === 'failed' || outcome.status === 'unknown' || outcome.status === 'unconfirmed') {
      this.metrics.finish(row.kind, outcome.status, outcome.failure_code, row.identity ?? DEFAULT_IDENTITY);
      if (outcome.status === 'delivered') this.metrics.sent(row.kind, row.created_at, started, this.clock.now());
      // The reason holds the platform's status and code or Herald's own words, never content.
      log.info({ state: outcome.status, code: outcome.failure_code ?? undefined, reason: outcome.reason ?? undefined }, 'delivery finished');
    }
  }

  /**
   * Record an attempt's outcome while the lease is held. A database that is briefly unreachable
   * (a restart, a failover) is waited for until the lease ends, so the outcome is not lost to a
   * re-drive.
   */
  private async record(row: DeliveryRow, lease: Lease, update: DeliveryUpdate): Promise<boolean> {
    const leaseEnds = row.lease_expires_at?.getTime() ?? 0;
    return retryWhileUnreachable(() => finishAttempt(this.db, row.request_id, lease, update), leaseEnds - this.clock.now().getTime());
  }

  /** Declare a send kind (its owner's module does, through the wiring); replaces a declared one. */
  declare<T>(kind: SendKind<T>): this {
    this.sendKinds.set(kind.kind, kind as SendKind<unknown>);
    return this;
  }

  private async deliver(at: Attempt): Promise<Outcome> {
    const { row } = at;
    if (at.unconfigured === true) return { status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE', reason: `identity ${row.identity ?? ''} is not configured on this Herald` };
    if (row.kind === 'edit') return this.deliverEdit(at, row.target as EditTarget);
    if (row.kind === 'delete' || row.kind === 'reaction') return this.deliverMessageOp(at);
    const kind = this.sendKinds.get(row.kind);
    if (kind === undefined) return { status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE', reason: `no send kind ${row.kind} is declared in this process` };
    if ('send' in kind) return this.selfSend(at, kind);
    const resolved = await kind.resolve(row.target, { transports: at.platforms, identity: row.identity ?? DEFAULT_IDENTITY, ports: this.ports, signal: at.signal, log: at.log });
    if ('refused' in resolved) {
      if (row.kind === 'post' && resolved.refused.reason === DESTINATION_UNMAPPED) this.metrics.postUnmapped();
      at.nowhere = true;
      return { status: 'failed', failure_code: resolved.refused.code, reason: resolved.refused.reason };
    }
    return this.sendOnce(at, resolved.address, resolved.scope, resolved.mentions, resolved.replyTo);
  }

  /**
   * A kind that sends several messages by itself, under the same in-doubt rule as a post: a doubt
   * is settled first (once its window has settled, by the kind's proof), then only what the proof
   * did not find is sent; after the last attempt, one claim only looks.
   */
  private async selfSend(at: Attempt, kind: SelfSendingKind<unknown>): Promise<Outcome> {
    const { row, log } = at;
    const context = { transports: at.platforms, identity: row.identity ?? DEFAULT_IDENTITY, ports: this.ports, signal: at.signal, log, row, siblings: (since: Date) => findRecentOfKind(this.db, row.kind, row.request_id, since) };
    const target = row.target as { transport?: TransportName; channel?: string };
    const where = { ...(target.transport !== undefined ? { transport: target.transport } : {}), ...(target.channel !== undefined ? { channel_id: target.channel } : {}) };
    if (target.transport !== undefined) at.sendingWith = target.transport;
    const finalCheck = row.attempts > this.options.maxAttempts;
    let found = new Map<number, string>();
    if (at.doubt !== undefined) {
      const nowMs = this.clock.now().getTime();
      const settled = at.doubt.until.getTime() + RECONCILE_SETTLE_MS;
      if (nowMs < settled) return { status: 'pending', next_attempt_at: new Date(settled), attempts: row.attempts - 1 };
      const proven = await kind.prove(row.target, at.doubt, context);
      this.metrics.reconciled(row.kind, proven === undefined ? 'undecided' : proven.size > 0 ? 'found' : 'absent');
      if (proven === undefined) {
        log.warn('in doubt and the platform cannot tell whether it was sent');
        return { status: 'unknown', reason: SELF_SEND_UNDECIDED, ...where };
      }
      if (proven.size > 0 && finalCheck) {
        return { status: 'unknown', reason: `attempts exhausted: ${proven.size} part(s) of it are in the channel, and it is not sent again`, ...where };
      }
      // Parts found stay in doubt until the send completes: a later retry proves them again.
      if (proven.size === 0) at.doubt = undefined;
      found = proven;
    }
    if (finalCheck) return { status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE', reason: 'attempts exhausted; the channel shows nothing was created', ...where };
    at.creatingIn = kind.channelOf(row.target);
    const sent = await kind.send(row.target, row.body, context, found);
    return {
      status: sent.status,
      failure_code: sent.status === 'failed' ? 'UPSTREAM_UNAVAILABLE' : null,
      reason: sent.reason ?? null,
      ...(sent.messageIds !== undefined ? { message_ids: JSON.stringify(sent.messageIds) } : {}),
      ...where,
    };
  }

  /**
   * A delete or a reaction (delivery.message-ops.ts): one idempotent platform call, retried (and
   * re-driven after a crash) until the platform answers; a lost answer leaves it in doubt, so it is
   * never reported failed when it may have acted.
   */
  private async deliverMessageOp(at: Attempt): Promise<Outcome> {
    const context: MessageOpContext = {
      db: this.db,
      transports: at.platforms,
      identity: at.row.identity,
      ports: this.ports,
      signal: at.signal,
      log: at.log,
      acting: (transport, channelId) => {
        at.sendingWith = transport.name;
        at.creatingIn = channelId;
      },
    };
    const outcome = await (at.row.kind === 'delete' ? deliverDelete(context, at.row.target as DeleteTarget) : deliverReaction(context, at.row.target as ReactionTarget, at.row.body));
    // Refused before the platform call (the message is not Herald's, or not here): it acted nowhere.
    if (outcome.status === 'failed' && at.creatingIn === undefined) at.nowhere = true;
    // A reaction on a message that is gone: a reaction an earlier attempt may have added went with
    // it, so nothing is in doubt (kept, every re-drive and re-POST would end `unknown`, for ever).
    if (at.row.kind === 'reaction' && outcome.status === 'failed' && outcome.failure_code === 'NOT_FOUND') at.doubt = undefined;
    return outcome;
  }

  /**
   * Edits of one message apply one at a time across every process (a short, renewed lease on the
   * original's row) and in seq order: a seq below the last applied one is reported unapplied, with
   * no platform call. Applying is idempotent, so a re-drive after a crash is harmless.
   */
  private async deliverEdit(at: Attempt, target: EditTarget): Promise<Outcome> {
    const { row, log } = at;
    const original = await findDelivery(this.db, target.message_ref);
    // Only Herald's own post or DM: never a reaction, a delete, an edit, a handoff, a reply or a chat send's row.
    // Another identity's message is not found: an agent edits only what it sent as itself.
    if (original === undefined || !isOwnMessage(original) || original.identity !== row.identity) return { status: 'failed', failure_code: 'NOT_FOUND', reason: 'original not found or not delivered' };
    const identity = row.identity ?? DEFAULT_IDENTITY;
    if (original.kind === 'dm' && !(await this.ports.isRegistered((original.target as DmTarget).user_id, identity))) {
      return { status: 'failed', failure_code: 'RECIPIENT_UNREACHABLE', reason: notRegisteredWith(identity) };
    }
    const holder = `${at.owner}:${row.request_id}`;
    const lease = await takeEditLease(this.db, this.clock, original.request_id, holder, this.options.leaseMs);
    if (lease === undefined) {
      // Another edit of this message is being applied: wait for it, without spending an attempt.
      log.debug({ original: original.request_id }, 'edit waits for an earlier edit of the same message');
      return { status: 'pending', next_attempt_at: new Date(this.clock.now().getTime() + EDIT_BUSY_RETRY_MS), attempts: row.attempts - 1 };
    }
    // Stop applying if the lease is lost; the edit leaves only while it holds (its fence, checked when the request leaves).
    const applying = AbortSignal.any([at.signal, lease.lost]);
    try {
      const delivered = { status: 'delivered' as const, url: original.url, channel_id: original.channel_id, message_id: original.message_id };
      if (lease.lastAppliedSeq !== null && target.seq < lease.lastAppliedSeq) {
        log.info({ seq: target.seq, last_applied_seq: lease.lastAppliedSeq }, 'edit superseded by a higher seq');
        return { ...delivered, applied: false };
      }
      if (lease.lastAppliedSeq === target.seq && lease.lastAppliedBy === row.request_id) {
        // An earlier attempt of this edit applied it and recorded its seq, then stalled or died before
        // its outcome was written. Nothing newer has been applied since: the message shows this edit.
        log.info({ seq: target.seq }, 'edit already applied by an earlier attempt');
        return { ...delivered, applied: true };
      }
      const transport = this.transport(at, original.transport ?? at.platforms.home.name);
      try {
        await withFence(lease.fence, () => facet(transport.editor, 'edits').edit(original.channel_id, original.message_id, row.body, applying));
      } catch (err) {
        // Deleted by a `delete` Herald delivered: the edit fails NOT_FOUND, plainly. (Gone otherwise,
        // deleted by someone on the platform: as before, the platform's refusal.)
        if (err instanceof TransportError && err.failure.kind === 'not_found' && (await deletedByHerald(this.db, original.request_id))) {
          return { status: 'failed', failure_code: 'NOT_FOUND', reason: 'the message was deleted (a delete delivery of it)' };
        }
        throw err;
      }
      // Recorded before the lock is released, so the next edit compares against it. A crash before
      // this line re-drives the edit: equal seq applies again, which is harmless.
      if (!(await recordAppliedSeq(this.db, original.request_id, target.seq, row.request_id, holder))) {
        // The edit lease was taken over meanwhile (this process stalled past it): another edit may
        // have landed after this one, so it is applied again, under a new edit lease.
        log.warn({ original: original.request_id }, 'edit lease lost before its seq was recorded; the edit is applied again');
        return { status: 'pending', next_attempt_at: this.clock.now(), attempts: row.attempts - 1 };
      }
      return { ...delivered, applied: true };
    } finally {
      await lease.release().catch((err: unknown) => log.warn({ err: errorSummary(err) }, 'edit lock release failed; it expires in seconds'));
    }
  }

  /**
   * Create the message unless an earlier attempt already did, always with the delivery's own
   * nonce. `scope` is the url's guild part: the guild id, or `@me` for a DM. A delivery in doubt
   * goes to the channel (and platform) its doubtful create went to, whatever the target maps to now.
   */
  private async sendOnce(at: Attempt, mapped: Address, scope: string, mentions?: Mentions, replyTo?: string): Promise<Outcome> {
    const channelId = at.doubt?.channelId ?? mapped.channelId;
    const transport = this.transport(at, (at.doubt !== undefined ? at.doubtTransport : null) ?? mapped.transport);
    at.sendingWith = transport.name;
    const delivered = (sent: SentMessage): Outcome => ({
      status: 'delivered',
      transport: transport.name,
      channel_id: sent.channelId,
      message_id: sent.messageId,
      url: transport.messageUrl(scope, sent.channelId, sent.messageId),
    });
    // After the last attempt a delivery in doubt gets one more claim that only looks.
    const finalCheck = at.row.attempts > this.options.maxAttempts;
    // Only a platform that honours idempotency keys dedupes a resend; on others, always reconcile.
    const trustedWindowMs = transport.idempotentSend ? this.options.nonceWindowMs : 0;
    const nowMs = this.clock.now().getTime();
    // Inside the nonce window the platform itself answers a resend with the message already created.
    if (at.doubt !== undefined && (finalCheck || nowMs - at.doubt.from.getTime() > trustedWindowMs)) {
      const settled = at.doubt.until.getTime() + RECONCILE_SETTLE_MS;
      if (nowMs < settled) return { status: 'pending', next_attempt_at: new Date(settled), attempts: at.row.attempts - 1 };
      const verdict = await reconcile(this.db, this.clock, at.row, at.signal, transport, at.doubt, channelId, replyTo);
      this.metrics.reconciled(at.row.kind, verdict.kind);
      if (verdict.kind === 'found') return delivered(verdict.message);
      if (verdict.kind === 'wait') return { status: 'pending', next_attempt_at: new Date(nowMs + TWIN_WAIT_MS), attempts: at.row.attempts - 1 };
      if (verdict.kind === 'undecided') {
        at.log.warn({ reason: verdict.reason }, 'in doubt and cannot tell from channel history whether it was sent');
        return { status: 'unknown', reason: verdict.reason };
      }
      at.log.info('reconciled: no message from the in-doubt attempt');
      at.doubt = undefined;
    }
    if (finalCheck) return { status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE', reason: 'attempts exhausted; channel history shows no message was created' };
    at.creatingIn = channelId;
    const attemptFrom = this.clock.now();
    // A resend in doubt relies on the nonce, counted from the doubtful create: it must leave inside
    // the window, checked when it actually leaves (after the rate budget and the client's queue).
    const deadline = transport.idempotentSend && at.doubt !== undefined ? { notAfter: new Date(at.doubt.from.getTime() + this.options.nonceWindowMs) } : undefined;
    const outgoing = await withAttachmentBytes(at.row.body, transport, this.ports);
    if ('refused' in outgoing) return { status: 'failed', failure_code: outgoing.refused.code, reason: outgoing.refused.reason };
    const message = replyTo !== undefined ? { ...outgoing.message, replyTo } : outgoing.message;
    const sent = await facet(transport.sender, 'sending').send(channelId, message, deliveryNonce(at.row.request_id), at.signal, mentions, deadline);
    if (sent.confirmed === false) {
      // Written, with no proof the platform took it (an IRC server without labeled-response or
      // echo-message): never claimed delivered. Kept in doubt, so a re-POST looks in the channel first.
      at.doubt = { from: at.doubt?.from ?? attemptFrom, until: this.clock.now(), channelId };
      at.log.warn('sent without confirmation from the platform; the delivery stays unknown');
      return { status: 'unknown', reason: `unconfirmed: ${transport.name} gave no proof it took the message (no labeled echo)` };
    }
    return delivered(sent);
  }
}
