import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { ChatHostError, type ChatHost, type SentMessage } from '../../chat/chat-host.js';
import type { Clock } from '../../platform/clock.js';
import { isStoreUnavailable, type Database, type Store } from '../../platform/db/database.js';
import { findDestinationChannel } from '../destinations/destination.repository.js';
import type { Metrics } from '../../platform/metrics.js';
import { findRegistration } from '../identity/identity.repository.js';
import { deliveryNonce, discordMessageUrl, type DmTarget, type EditTarget, type PostTarget } from './delivery.js';
import {
  acquireEditLock,
  claimDue,
  DELIVERY_CHANNEL,
  findDelivery,
  findSentMessage,
  findUnresolvedTwin,
  finishAttempt,
  pruneDeliveries,
  recordAppliedSeq,
  recordedMessages,
  releaseEditLock,
  releaseLeases,
  renewEditLock,
  sentMessageNonces,
} from './delivery.repository.js';
import { RETENTION_MS } from './delivery.service.js';
import type { DeliveryRow, DeliveryUpdate } from './delivery.table.js';

export interface DispatcherOptions {
  leaseMs: number;
  pollMs: number;
  nonceWindowMs: number;
  maxAttempts: number;
  retryBaseMs: number;
  concurrency: number;
  shutdownGraceMs: number;
}

const MAX_BACKOFF_MS = 5 * 60 * 1000;
const PRUNE_EVERY_MS = 60 * 60 * 1000;
/**
 * How far around an in-doubt window reconciliation looks: clock skew between Herald and Discord,
 * and a request Discord finished processing after Herald stopped waiting for it.
 */
const RECONCILE_SKEW_MS = 10 * 1000;
/**
 * How long after an in-doubt create ended its message must have shown in the channel's history,
 * if it was created: reconciliation waits this long after the doubt window closes.
 */
const RECONCILE_SETTLE_MS = 5 * 1000;
/** How many channel messages in the doubt window reconciliation reads at most. */
const RECONCILE_MAX_MESSAGES = 1000;

type Outcome = Pick<DeliveryUpdate, 'status' | 'failure_code' | 'channel_id' | 'message_id' | 'url' | 'next_attempt_at' | 'applied' | 'attempts' | 'reason'>;

/** How soon an edit retries when another edit of the same message is being applied. */
const EDIT_BUSY_RETRY_MS = 100;
/**
 * The edit lease on an original lasts this long unless its holder renews it (every fifth of it), so
 * an edit left by a killed process blocks the next one for seconds, not a whole delivery lease.
 */
const EDIT_LOCK_TTL_MS = 5_000;

/** When and where a create may have happened without Herald learning its result. */
interface Doubt {
  from: Date;
  until: Date;
  /** Null: the channel the target maps to (a process died before saying which). */
  channelId: string | null;
}

/** One attempt at one delivery; `doubt` is what the attempt knows, written back with its outcome. */
interface Attempt {
  row: DeliveryRow;
  signal: AbortSignal;
  log: Logger;
  doubt: Doubt | undefined;
  /** Set just before a create goes out: where it went. */
  creatingIn?: string;
}

/**
 * Drives stored deliveries to Discord: claims due rows under a lease (`FOR UPDATE SKIP LOCKED`,
 * so any number of dispatchers share one database), sends each with a nonce derived from its
 * request_id, and records the outcome only while it still holds the lease.
 */
export class Dispatcher {
  readonly owner = `dispatcher-${randomUUID()}`;
  private readonly inFlight = new Map<string, { done: Promise<void>; abort: AbortController }>();
  private stopping = false;
  private loopDone: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private lastPrune = 0;

  constructor(
    private readonly store: Store,
    private readonly host: ChatHost,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    private readonly options: DispatcherOptions,
  ) {}

  private get db(): Kysely<Database> {
    return this.store.db;
  }

  get running(): boolean {
    return this.loopDone !== undefined && !this.stopping;
  }

  async start(): Promise<void> {
    try {
      this.unlisten = await this.store.listen(DELIVERY_CHANNEL, () => this.wake());
    } catch (err) {
      this.log.warn({ err: errorSummary(err) }, 'LISTEN unavailable; polling only');
    }
    this.loopDone = this.loop();
  }

  /** Stop claiming; let in-flight attempts finish within the grace period, then release the rest. */
  async stop(): Promise<void> {
    if (this.loopDone === undefined || this.stopping) return;
    this.stopping = true;
    this.wake();
    await this.loopDone;
    await this.unlisten?.();
    const all = Promise.all([...this.inFlight.values()].map((a) => a.done));
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), this.options.shutdownGraceMs)));
    const result = await Promise.race([all.then(() => 'done' as const), graceOver]);
    clearTimeout(timer);
    if (result === 'timeout') {
      for (const a of this.inFlight.values()) a.abort.abort();
      await all;
    }
    const released = await releaseLeases(this.db, this.owner, this.clock.now());
    if (released > 0) this.log.info({ released }, 'released in-flight deliveries');
  }

  /** Delete records past the protocol's 8-day retention. */
  async prune(): Promise<number> {
    const removed = await pruneDeliveries(this.db, new Date(this.clock.now().getTime() - RETENTION_MS));
    if (removed > 0) this.log.info({ removed }, 'pruned old deliveries');
    return removed;
  }

  private wake(): void {
    const w = this.wakeUp;
    this.wakeUp = undefined;
    w?.();
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.tick();
      } catch (err) {
        this.log.error({ err: errorSummary(err) }, 'dispatcher tick failed');
      }
      if (this.stopping) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.options.pollMs);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  private async tick(): Promise<void> {
    const nowMs = this.clock.now().getTime();
    if (nowMs - this.lastPrune >= PRUNE_EVERY_MS) {
      this.lastPrune = nowMs;
      await this.prune();
    }
    const capacity = this.options.concurrency - this.inFlight.size;
    if (capacity <= 0) return;
    const rows = await claimDue(this.db, this.owner, this.clock.now(), this.options.leaseMs, capacity);
    // A full batch may leave more due: each finished attempt wakes the loop (launch), so it looks again.
    for (const row of rows) this.launch(row);
  }

  private launch(row: DeliveryRow): void {
    const abort = new AbortController();
    // Give up before the lease ends, so no attempt records anything after another could have taken over.
    const timer = setTimeout(() => abort.abort(), Math.max(1, this.options.leaseMs - 1_000));
    const done = this.attempt(row, abort.signal)
      .catch((err: unknown) => this.log.error({ request_id: row.request_id, err: errorSummary(err) }, 'attempt bookkeeping failed'))
      .finally(() => {
        clearTimeout(timer);
        this.inFlight.delete(row.request_id);
        this.wake();
      });
    this.inFlight.set(row.request_id, { done, abort });
  }

  private async attempt(row: DeliveryRow, signal: AbortSignal): Promise<void> {
    const log = this.log.child({ request_id: row.request_id, kind: row.kind, attempt: row.attempts });
    const started = row.attempt_started_at ?? this.clock.now();
    const doubt = row.doubt_from !== null ? { from: row.doubt_from, until: row.doubt_until ?? row.doubt_from, channelId: row.doubt_channel_id } : undefined;
    const at: Attempt = { row, signal, log, doubt };
    let outcome: Outcome;
    try {
      outcome = await this.deliver(at);
    } catch (err) {
      const failure = err instanceof ChatHostError ? err.failure : { kind: 'transient' as const, detail: errorSummary(err) };
      if (failure.kind === 'transient' && failure.mayHaveCreated === true && at.creatingIn !== undefined) {
        // The create may have happened: from this attempt's start until now, in that channel.
        at.doubt = { from: at.doubt?.from ?? started, until: this.clock.now(), channelId: at.creatingIn };
        log.warn({ detail: failure.detail }, 'create may have reached discord unanswered; the delivery is in doubt');
      }
      if (failure.kind !== 'transient') {
        outcome = { status: 'failed', failure_code: failure.kind === 'recipient_unreachable' ? 'RECIPIENT_UNREACHABLE' : 'UPSTREAM_UNAVAILABLE', reason: failure.detail };
        log.warn({ detail: failure.detail }, 'delivery rejected by discord');
      } else if (row.attempts >= this.options.maxAttempts) {
        if (at.doubt === undefined) {
          outcome = { status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE', reason: `attempts exhausted (${failure.detail})` };
        } else if (row.attempts === this.options.maxAttempts) {
          // Out of attempts, but a create may have happened: one more claim only looks (never sends),
          // once the doubt window has settled, and fails only if the channel shows nothing was created.
          outcome = { status: 'pending', next_attempt_at: new Date(at.doubt.until.getTime() + RECONCILE_SETTLE_MS), reason: 'final check of an in-doubt delivery' };
        } else {
          outcome = { status: 'unknown', reason: `unconfirmed: a create may have reached Discord and channel history could not be read (${failure.detail})` };
        }
        log.warn({ detail: failure.detail, state: outcome.status }, 'delivery gave up after its last attempt');
      } else {
        const delay = this.backoff(row.attempts, failure.retryAfterMs);
        outcome = { status: 'pending', next_attempt_at: new Date(this.clock.now().getTime() + delay) };
        log.info({ detail: failure.detail, retry_in_ms: delay }, 'delivery will be retried');
        this.metrics.inc('herald_delivery_retries_total', 'Attempts that will be retried', { kind: row.kind });
      }
    }
    if (outcome.status === 'failed' && at.doubt !== undefined) {
      // Failing now would claim nothing was sent, yet an earlier create may have been.
      outcome = { status: 'unknown', reason: `${outcome.failure_code ?? 'failed'} (${outcome.reason ?? 'rejected'}) after a create that may have reached Discord` };
    }
    const resolved = outcome.status === 'delivered' ? undefined : at.doubt;
    const recorded = await this.record(row, log, {
      ...outcome,
      reason: outcome.reason ?? null,
      doubt_from: resolved?.from ?? null,
      doubt_until: resolved?.until ?? null,
      doubt_channel_id: resolved?.channelId ?? null,
    });
    if (!recorded) {
      log.warn('lease lost before the outcome was recorded; the new holder re-drives it');
      return;
    }
    if (outcome.status === 'delivered' || outcome.status === 'failed' || outcome.status === 'unknown') {
      this.metrics.inc('herald_deliveries_total', 'Deliveries that reached a terminal state', {
        kind: row.kind,
        outcome: outcome.status,
        ...(outcome.failure_code ? { code: outcome.failure_code } : {}),
      });
      // The reason holds Discord's status and code or Herald's own words, never content.
      log.info({ state: outcome.status, code: outcome.failure_code ?? undefined, reason: outcome.reason ?? undefined }, 'delivery finished');
    }
  }

  /**
   * Record an attempt's outcome while the lease is held. A database that is briefly unreachable
   * (a restart, a failover) is waited for until the lease ends, so the outcome is not lost to a
   * re-drive.
   */
  private async record(row: DeliveryRow, log: Logger, update: DeliveryUpdate): Promise<boolean> {
    const leaseEnds = row.lease_expires_at?.getTime() ?? 0;
    for (let waitMs = 100; ; waitMs = Math.min(waitMs * 2, 2_000)) {
      try {
        return await finishAttempt(this.db, row.request_id, this.owner, update);
      } catch (err) {
        if (!isStoreUnavailable(err) || this.clock.now().getTime() + waitMs >= leaseEnds) throw err;
        log.warn({ retry_in_ms: waitMs }, 'database unreachable while recording an outcome; retrying');
        await new Promise((resolve) => setTimeout(resolve, waitMs));
      }
    }
  }

  private async deliver(at: Attempt): Promise<Outcome> {
    const { row } = at;
    switch (row.kind) {
      case 'post':
        return this.deliverPost(at, row.target as PostTarget);
      case 'dm':
        return this.deliverDm(at, row.target as DmTarget);
      case 'edit':
        return this.deliverEdit(at, row.target as EditTarget);
    }
  }

  /** To a registered user only, checked now (at send time), through their DM channel. */
  private async deliverDm(at: Attempt, target: DmTarget): Promise<Outcome> {
    if ((await findRegistration(this.db, target.user_id)) === undefined) {
      at.log.info({ reason: 'recipient_unregistered' }, 'dm recipient is not registered');
      return { status: 'failed', failure_code: 'RECIPIENT_UNREACHABLE', reason: 'recipient not registered' };
    }
    const channelId = await this.host.openDm(target.user_id, at.signal);
    return this.sendOnce(at, channelId, '@me');
  }

  /**
   * Edits of one message apply one at a time across every process (a short, renewed lease on the
   * original's row) and in seq order: a seq below the last applied one is reported unapplied, with
   * no Discord call. Applying is idempotent, so a re-drive after a crash is harmless.
   */
  private async deliverEdit(at: Attempt, target: EditTarget): Promise<Outcome> {
    const { row, log } = at;
    const original = await findDelivery(this.db, target.message_ref);
    if (original === undefined || original.status !== 'delivered' || original.kind === 'edit' || original.channel_id === null || original.message_id === null) {
      return { status: 'failed', failure_code: 'NOT_FOUND', reason: 'original not found or not delivered' };
    }
    if (original.kind === 'dm' && (await findRegistration(this.db, (original.target as DmTarget).user_id)) === undefined) {
      return { status: 'failed', failure_code: 'RECIPIENT_UNREACHABLE', reason: 'recipient not registered' };
    }
    const holder = `${this.owner}:${row.request_id}`;
    const ttl = Math.min(EDIT_LOCK_TTL_MS, this.options.leaseMs);
    const lock = await acquireEditLock(this.db, original.request_id, holder, this.clock.now(), ttl);
    if (lock === undefined) {
      // Another edit of this message is being applied: wait for it, without spending an attempt.
      return { status: 'pending', next_attempt_at: new Date(this.clock.now().getTime() + EDIT_BUSY_RETRY_MS), attempts: row.attempts - 1 };
    }
    // Renew the lease while applying; stop applying if it is lost or cannot be renewed in time.
    const applying = new AbortController();
    const stopApplying = () => applying.abort();
    at.signal.addEventListener('abort', stopApplying, { once: true });
    let renewedAt = Date.now();
    const renewal = setInterval(() => {
      renewEditLock(this.db, original.request_id, holder, this.clock.now(), ttl).then(
        (held) => (held ? (renewedAt = Date.now()) : applying.abort()),
        () => (Date.now() - renewedAt > ttl / 2 ? applying.abort() : undefined),
      );
    }, ttl / 5);
    try {
      const delivered = { status: 'delivered' as const, url: original.url, channel_id: original.channel_id, message_id: original.message_id };
      if (lock.last_applied_seq !== null && target.seq < lock.last_applied_seq) {
        log.info({ seq: target.seq, last_applied_seq: lock.last_applied_seq }, 'edit superseded by a higher seq');
        return { ...delivered, applied: false };
      }
      await this.host.editMessage(original.channel_id, original.message_id, row.body, applying.signal);
      // Recorded before the lock is released, so the next edit compares against it. A crash before
      // this line re-drives the edit: equal seq applies again, which is harmless.
      await recordAppliedSeq(this.db, original.request_id, target.seq);
      return { ...delivered, applied: true };
    } finally {
      clearInterval(renewal);
      at.signal.removeEventListener('abort', stopApplying);
      await releaseEditLock(this.db, original.request_id, holder).catch((err: unknown) => log.warn({ err: errorSummary(err) }, 'edit lock release failed; it expires in seconds'));
    }
  }

  private async deliverPost(at: Attempt, target: PostTarget): Promise<Outcome> {
    const channelId = await findDestinationChannel(this.db, target.guild_id, target.destination);
    if (channelId === undefined) {
      at.log.warn({ guild_id: target.guild_id, destination: target.destination, reason: 'destination_unmapped' }, 'no channel mapped for this destination');
      this.metrics.inc('herald_post_unmapped_total', 'Posts failed because their (guild, destination) has no channel', { destination: target.destination });
      return { status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE', reason: 'destination not mapped' };
    }
    return this.sendOnce(at, channelId, target.guild_id);
  }

  /**
   * Create the message unless an earlier attempt already did, always with the delivery's own
   * nonce. `scope` is the url's guild part: the guild id, or `@me` for a DM. A delivery in doubt
   * goes to the channel its doubtful create went to, whatever the target maps to now.
   */
  private async sendOnce(at: Attempt, mappedChannelId: string, scope: string): Promise<Outcome> {
    const channelId = at.doubt?.channelId ?? mappedChannelId;
    const delivered = (sent: SentMessage): Outcome => ({
      status: 'delivered',
      channel_id: sent.channelId,
      message_id: sent.messageId,
      url: discordMessageUrl(scope, sent.channelId, sent.messageId),
    });
    // After the last attempt a delivery in doubt gets one more claim that only looks.
    const finalCheck = at.row.attempts > this.options.maxAttempts;
    const nowMs = this.clock.now().getTime();
    // Inside the nonce window Discord itself answers a resend with the message already created.
    if (at.doubt !== undefined && (finalCheck || nowMs - at.doubt.from.getTime() > this.options.nonceWindowMs)) {
      const settled = at.doubt.until.getTime() + RECONCILE_SETTLE_MS;
      if (nowMs < settled) return { status: 'pending', next_attempt_at: new Date(settled), attempts: at.row.attempts - 1 };
      const verdict = await this.reconcile(at, at.doubt, channelId);
      this.metrics.inc('herald_reconciliations_total', 'In-doubt deliveries looked up in channel history, by verdict', { kind: at.row.kind, verdict: verdict.kind });
      if (verdict.kind === 'found') return delivered(verdict.message);
      if (verdict.kind === 'undecided') {
        at.log.warn({ reason: verdict.reason }, 'in doubt and cannot tell from channel history whether it was sent');
        return { status: 'unknown', reason: verdict.reason };
      }
      at.log.info('reconciled: no message from the in-doubt attempt');
      at.doubt = undefined;
    }
    if (finalCheck) return { status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE', reason: 'attempts exhausted; channel history shows no message was created' };
    at.creatingIn = channelId;
    return delivered(await this.host.createMessage(channelId, at.row.body, deliveryNonce(at.row.request_id), at.signal));
  }

  /**
   * Past the nonce window: if the gateway reported which message this delivery's nonce created,
   * that is it. Otherwise look for the in-doubt create's message in the channel: by this bot,
   * showing this body, created within the doubt window (widened by the skew). A message another
   * delivery recorded, or the gateway reported under another nonce, is not ours. While another unresolved delivery with the same body may have
   * created a message in that window, a match cannot be told apart from it: undecided, never a guess.
   */
  private async reconcile(at: Attempt, doubt: Doubt, channelId: string): Promise<{ kind: 'found'; message: SentMessage } | { kind: 'absent' } | { kind: 'undecided'; reason: string }> {
    const { row, signal } = at;
    const nonce = deliveryNonce(row.request_id);
    // The gateway told us which message this nonce created: that settles it exactly.
    const reported = await findSentMessage(this.db, nonce);
    if (reported !== undefined) return { kind: 'found', message: { channelId: reported.channel_id, messageId: reported.message_id } };
    const from = new Date(doubt.from.getTime() - RECONCILE_SKEW_MS);
    const until = new Date(doubt.until.getTime() + RECONCILE_SKEW_MS);
    const self = await this.host.selfId();
    const fingerprint = this.host.fingerprint(row.body);
    const seen = await this.host.listMessagesBetween(channelId, from, until, RECONCILE_MAX_MESSAGES, signal);
    if (!seen.complete) return { kind: 'undecided', reason: `more than ${RECONCILE_MAX_MESSAGES} messages in the channel during the doubt window` };
    const alike = seen.messages.filter((m) => m.authorId === self && m.fingerprint === fingerprint);
    if (alike.length === 0) return { kind: 'absent' };
    // Look for a twin before reading what is recorded: a twin recording its message in between
    // is then still counted as a twin (undecided), never missed.
    const twin = await findUnresolvedTwin(this.db, row.request_id, from, until);
    const ids = alike.map((m) => m.messageId);
    const taken = await recordedMessages(this.db, ids, row.request_id);
    // A message the gateway reported under another nonce is another delivery's, recorded or not.
    const nonces = await sentMessageNonces(this.db, ids);
    const ours = alike.filter((m) => !taken.has(m.messageId) && (nonces.get(m.messageId) ?? nonce) === nonce);
    if (ours.length === 0) return { kind: 'absent' };
    if (twin !== undefined) return { kind: 'undecided', reason: 'another unresolved delivery with the same content may own the matching message' };
    if (ours.length > 1) return { kind: 'undecided', reason: `${ours.length} unrecorded messages with the same content in the doubt window` };
    const [message] = ours;
    return message === undefined ? { kind: 'absent' } : { kind: 'found', message };
  }

  private backoff(attempts: number, retryAfterMs: number | undefined): number {
    const ceiling = Math.min(MAX_BACKOFF_MS, this.options.retryBaseMs * 2 ** Math.max(0, attempts - 1));
    const jittered = Math.floor(Math.random() * ceiling);
    return Math.max(jittered, retryAfterMs ?? 0, 1);
  }
}

/** An error's kind and message, never request data: Discord errors here carry no content. */
export function errorSummary(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
