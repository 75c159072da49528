import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { ChatHostError, type ChatHost, type OutgoingMessage } from '../chat/chat-host.js';
import type { Clock } from '../clock.js';
import type { Database, Store } from '../db/database.js';
import { findDestinationChannel } from '../destinations/destination.repository.js';
import type { Metrics } from '../metrics.js';
import { findRegistration } from '../identity/identity.repository.js';
import { deliveryNonce, discordMessageUrl, type DmTarget, type EditTarget, type PostTarget } from './delivery.js';
import {
  acquireEditLock,
  claimDue,
  DELIVERY_CHANNEL,
  findDelivery,
  finishAttempt,
  isMessageRecorded,
  pruneDeliveries,
  recordAppliedSeq,
  releaseEditLock,
  releaseLeases,
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
/** How far before an in-doubt attempt reconciliation looks, for clock skew with Discord. */
const RECONCILE_SKEW_MS = 60 * 1000;
/** How many recent channel messages reconciliation reads at most. */
const RECONCILE_MAX_MESSAGES = 500;

type Outcome = Pick<DeliveryUpdate, 'status' | 'failure_code' | 'channel_id' | 'message_id' | 'url' | 'next_attempt_at' | 'applied' | 'attempts'>;

/** How soon an edit retries when another edit of the same message is being applied. */
const EDIT_BUSY_RETRY_MS = 100;

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
    let outcome: Outcome;
    try {
      outcome = await this.deliver(row, signal, log);
    } catch (err) {
      const failure = err instanceof ChatHostError ? err.failure : { kind: 'transient' as const, detail: errorSummary(err) };
      if (failure.kind !== 'transient') {
        outcome = { status: 'failed', failure_code: failure.kind === 'recipient_unreachable' ? 'RECIPIENT_UNREACHABLE' : 'UPSTREAM_UNAVAILABLE' };
        log.warn({ detail: failure.detail }, 'delivery rejected by discord');
      } else if (row.attempts >= this.options.maxAttempts) {
        outcome = { status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE' };
        log.warn({ detail: failure.detail }, 'delivery failed after its last attempt');
      } else {
        const delay = this.backoff(row.attempts, failure.retryAfterMs);
        outcome = { status: 'pending', next_attempt_at: new Date(this.clock.now().getTime() + delay) };
        log.info({ detail: failure.detail, retry_in_ms: delay }, 'delivery will be retried');
        this.metrics.inc('herald_delivery_retries_total', 'Attempts that will be retried', { kind: row.kind });
      }
    }
    const recorded = await finishAttempt(this.db, row.request_id, this.owner, outcome);
    if (!recorded) {
      log.warn('lease lost before the outcome was recorded; the new holder re-drives it');
      return;
    }
    if (outcome.status === 'delivered' || outcome.status === 'failed') {
      this.metrics.inc('herald_deliveries_total', 'Deliveries that reached a terminal state', {
        kind: row.kind,
        outcome: outcome.status,
        ...(outcome.failure_code ? { code: outcome.failure_code } : {}),
      });
      log.info({ state: outcome.status, code: outcome.failure_code ?? undefined }, 'delivery finished');
    }
  }

  private async deliver(row: DeliveryRow, signal: AbortSignal, log: Logger): Promise<Outcome> {
    switch (row.kind) {
      case 'post':
        return this.deliverPost(row, row.target as PostTarget, signal, log);
      case 'dm':
        return this.deliverDm(row, row.target as DmTarget, signal, log);
      case 'edit':
        return this.deliverEdit(row, row.target as EditTarget, signal, log);
    }
  }

  /** To a registered user only, checked now (at send time), through their DM channel. */
  private async deliverDm(row: DeliveryRow, target: DmTarget, signal: AbortSignal, log: Logger): Promise<Outcome> {
    if ((await findRegistration(this.db, target.user_id)) === undefined) {
      log.info({ reason: 'recipient_unregistered' }, 'dm recipient is not registered');
      return { status: 'failed', failure_code: 'RECIPIENT_UNREACHABLE' };
    }
    const channelId = await this.host.openDm(target.user_id, signal);
    return this.sendOnce(row, channelId, '@me', signal, log);
  }

  /**
   * Edits of one message apply one at a time across every process (a lease on the original's row)
   * and in seq order: a seq below the last applied one is reported unapplied, with no Discord call.
   * Applying is idempotent, so a re-drive after a crash is harmless.
   */
  private async deliverEdit(row: DeliveryRow, target: EditTarget, signal: AbortSignal, log: Logger): Promise<Outcome> {
    const original = await findDelivery(this.db, target.message_ref);
    if (original === undefined || original.status !== 'delivered' || original.kind === 'edit' || original.channel_id === null || original.message_id === null) {
      return { status: 'failed', failure_code: 'NOT_FOUND' };
    }
    if (original.kind === 'dm' && (await findRegistration(this.db, (original.target as DmTarget).user_id)) === undefined) {
      return { status: 'failed', failure_code: 'RECIPIENT_UNREACHABLE' };
    }
    const holder = `${this.owner}:${row.request_id}`;
    const lock = await acquireEditLock(this.db, original.request_id, holder, this.clock.now(), this.options.leaseMs);
    if (lock === undefined) {
      // Another edit of this message is being applied: wait for it, without spending an attempt.
      return { status: 'pending', next_attempt_at: new Date(this.clock.now().getTime() + EDIT_BUSY_RETRY_MS), attempts: row.attempts - 1 };
    }
    try {
      const delivered = { status: 'delivered' as const, url: original.url, channel_id: original.channel_id, message_id: original.message_id };
      if (lock.last_applied_seq !== null && target.seq < lock.last_applied_seq) {
        log.info({ seq: target.seq, last_applied_seq: lock.last_applied_seq }, 'edit superseded by a higher seq');
        return { ...delivered, applied: false };
      }
      await this.host.editMessage(original.channel_id, original.message_id, row.body, signal);
      // Recorded before the lock is released, so the next edit compares against it. A crash before
      // this line re-drives the edit: equal seq applies again, which is harmless.
      await recordAppliedSeq(this.db, original.request_id, target.seq);
      return { ...delivered, applied: true };
    } finally {
      await releaseEditLock(this.db, original.request_id, holder).catch((err: unknown) => log.warn({ err: errorSummary(err) }, 'edit lock release failed; it expires with the lease'));
    }
  }

  private async deliverPost(row: DeliveryRow, target: PostTarget, signal: AbortSignal, log: Logger): Promise<Outcome> {
    const channelId = await findDestinationChannel(this.db, target.guild_id, target.destination);
    if (channelId === undefined) {
      log.warn({ guild_id: target.guild_id, destination: target.destination, reason: 'destination_unmapped' }, 'no channel mapped for this destination');
      this.metrics.inc('herald_post_unmapped_total', 'Posts failed because their (guild, destination) has no channel', { destination: target.destination });
      return { status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE' };
    }
    return this.sendOnce(row, channelId, target.guild_id, signal, log);
  }

  /**
   * Create the message unless an earlier attempt already did (reconcile), always with the
   * delivery's own nonce. `scope` is the url's guild part: the guild id, or `@me` for a DM.
   */
  private async sendOnce(row: DeliveryRow, channelId: string, scope: string, signal: AbortSignal, log: Logger): Promise<Outcome> {
    const message: OutgoingMessage = row.body;
    const found = await this.reconcile(row, channelId, message, signal, log);
    const sent = found ?? (await this.host.createMessage(channelId, message, deliveryNonce(row.request_id), signal));
    return { status: 'delivered', channel_id: sent.channelId, message_id: sent.messageId, url: discordMessageUrl(scope, sent.channelId, sent.messageId) };
  }

  /**
   * An earlier attempt may have created the message. Inside the nonce window Discord itself returns
   * that message for the same nonce; outside it, look for it in the channel before sending again.
   */
  private async reconcile(row: DeliveryRow, channelId: string, message: OutgoingMessage, signal: AbortSignal, log: Logger) {
    const firstAttempt = row.first_attempt_at;
    if (row.attempts <= 1 || firstAttempt === null) return undefined;
    if (this.clock.now().getTime() - firstAttempt.getTime() <= this.options.nonceWindowMs) return undefined;
    const self = await this.host.selfId();
    const fingerprint = this.host.fingerprint(message);
    const since = new Date(firstAttempt.getTime() - RECONCILE_SKEW_MS);
    const seen = await this.host.listMessagesSince(channelId, since, RECONCILE_MAX_MESSAGES, signal);
    for (const m of seen) {
      if (m.authorId !== self || m.fingerprint !== fingerprint) continue;
      // The same text may have been sent by another delivery; that message is not ours.
      if (await isMessageRecorded(this.db, m.messageId, row.request_id)) continue;
      log.info('reconciled: the message from an earlier attempt exists');
      this.metrics.inc('herald_reconciled_total', 'In-doubt deliveries found already sent', { kind: row.kind });
      return m;
    }
    return undefined;
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
