import { createHash, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { components } from '../../../generated/api.js';
import type { HandoffLimits } from './settings.js';
import type { Clock } from '../../infra/clock.js';
import { errorSummary, InvalidRequestError, NotFoundError } from '../../infra/errors.js';
import type { HandoffsDb } from './handoff.table.js';
import type { InboundMessage } from '../../platforms/platform.js';
import type { HandoffTarget } from '../deliveries/index.js';
import type { DeliveryService } from '../deliveries/index.js';
import { wireStatus } from '../deliveries/index.js';
import type { DeliveryRow } from '../deliveries/index.js';
import { HANDOFF_SCHEMA, handoffContent, isCandidate, MAX_MESSAGE_UNITS, parseHandoffContent, validateHandoff, type RejectReason } from './envelope.js';
import { acceptedSince, acknowledge, listInbox, recordReceipt } from './handoff.repository.js';
import type { HandoffMetrics } from './handoff.metrics.js';
import type { HandoffInboxRow } from './handoff.table.js';
import { mayHandOffTo, UNMAPPED_CHANNEL, type HandoffPlaces } from './handoff.place.js';

type Schemas = components['schemas'];
export type HandoffRequest = Schemas['HandoffRequest'];
export type SentHandoff = Schemas['SentHandoff'];
export type InboxHandoff = Schemas['InboxHandoff'];

/** The longest a wait for the next handoff may last (the contract's bound). */
export const MAX_WAIT_MS = 30_000;
/** How often a waiting request looks at the inbox, should another replica's news of an arrival be lost. */
const WAIT_POLL_MS = 250;
/** A receipt that failed for a transient reason is tried again after this, doubling up to the most. */
const RETRY_FIRST_MS = 250;
const RETRY_MOST_MS = 10_000;
/** How long a message that names no expiry (no envelope to read) is retried at most. */
const RETRY_WITHOUT_EXPIRY_MS = 60_000;
/** Messages this process remembers having seen (so a sweep passes over them without the database). */
const REMEMBERED_MESSAGES = 20_000;

/** Where a message came from: the live stream, or a catch-up sweep over the channels' history. */
export type ReceiptPath = 'live' | 'catch-up';

/**
 * One message's receipt on this process: `done` once it is settled (taken in, refused, or no
 * handoff); `firstTry` resolves after the first attempt, `settled` when it is settled (true) or
 * given up (false: expired, or the service closed).
 */
export interface Receipt {
  done: boolean;
  readonly firstTry: Promise<void>;
  readonly settled: Promise<boolean>;
}

export interface HandoffServiceOptions {
  limits: HandoffLimits;
  /** This bot's own user id (the platform's answer, cached by the transport). */
  selfId: () => Promise<string>;
  /** Where a handoff may go: a mapped destination's channel, or a thread under one (handoff.place.ts). */
  places: HandoffPlaces;
  /** False: the platform cannot send, so handoffs are stored failed CAPABILITY_UNAVAILABLE. */
  canSend: boolean;
  log: Logger;
  metrics?: HandoffMetrics;
  /** Tell every process (this one included) a handoff arrived, after its commit; `arrived` is their side. */
  publish?: () => void;
  /** How often a wait looks at the inbox without news (the fallback; default 250 ms). */
  waitPollMs?: number;
}

/** A handoff is stored as a delivery under its own namespace of ids, so it never collides with one. */
export function handoffDeliveryId(requestId: string): string {
  return createHash('sha256').update(`handoff:${requestId}`).digest('hex');
}

/**
 * Bot-to-bot handoffs: sending one (an idempotent delivery of kind `handoff`, through the same
 * outbox, nonce and in-doubt reconciliation as every delivery), receiving them (validated, then
 * replay, capacity and rate decided in the database so every replica agrees), and the agent's
 * inbox of accepted ones.
 */
export class HandoffService {
  private readonly trusted: ReadonlySet<string>;
  /** Rung when a handoff arrived (here or on another replica): waiting requests look at once. */
  private readonly arrivals = new EventEmitter();
  /** Receipts by message id, oldest first: one per message on this process, however often it is seen. */
  private readonly receipts = new Map<string, Receipt>();
  /** Aborted on close: retries stop. */
  private readonly closing = new AbortController();

  constructor(
    private readonly db: Kysely<HandoffsDb>,
    private readonly deliveries: DeliveryService,
    private readonly clock: Clock,
    private readonly options: HandoffServiceOptions,
  ) {
    this.trusted = new Set(options.limits.trustedBotIds);
    this.arrivals.setMaxListeners(0);
  }

  /** Handoffs are off, both ways, while no bot is trusted. */
  get enabled(): boolean {
    return this.trusted.size > 0;
  }

  /**
   * Hand a task to a trusted bot. Refused before anything is stored when handoffs are off, the
   * target is this bot or untrusted, the text is blank, the whole message would exceed Discord's
   * 2,000 UTF-16 units (never truncated or split), or the channel is neither a mapped
   * destination's channel nor a thread under one (the same request stored before it was unmapped
   * still answers as stored).
   */
  async send(request: HandoffRequest): Promise<{ handoff: SentHandoff; existing: boolean }> {
    if (!this.enabled) throw new InvalidRequestError('handoffs are off: HERALD_TRUSTED_BOT_IDS is empty');
    const self = await this.options.selfId();
    if (request.target_bot_id === self) throw new InvalidRequestError('target_bot_id is this bot: a bot cannot hand off to itself');
    if (!this.trusted.has(request.target_bot_id)) throw new InvalidRequestError('target_bot_id is not in HERALD_TRUSTED_BOT_IDS');
    if (request.text.trim() === '') throw new InvalidRequestError('text must not be empty');
    if (request.origin_message_id !== undefined && request.origin_message_id === request.channel_id) {
      throw new InvalidRequestError('origin_message_id must be a message id, not the channel id');
    }
    const now = this.clock.now();
    const ttl = Math.min(request.expires_in_seconds ?? this.options.limits.ttlSeconds, this.options.limits.ttlSeconds);
    const expiresAt = Math.floor(now.getTime() / 1000) + ttl;
    const content = handoffContent({
      schema: HANDOFF_SCHEMA,
      source_bot_id: self,
      target_bot_id: request.target_bot_id,
      event_id: randomUUID(),
      origin_channel_id: request.channel_id,
      origin_thread_id: request.in_thread === true ? request.channel_id : null,
      origin_message_id: request.origin_message_id ?? null,
      expires_at: expiresAt,
      hop_count: 0,
      payload: { text: request.text },
    });
    if (content.length > MAX_MESSAGE_UNITS) {
      throw new InvalidRequestError(`the handoff message would be ${content.length} characters, over Discord's ${MAX_MESSAGE_UNITS}: shorten text (it is never truncated or split)`);
    }
    const target: HandoffTarget = { channel_id: request.channel_id, target_bot_id: request.target_bot_id };
    // What was asked for, not the envelope built from it (a fresh event_id and expiry each time).
    const asked = [request.target_bot_id, request.channel_id, request.in_thread === true, request.origin_message_id ?? null, request.text, request.expires_in_seconds ?? null];
    const hash = createHash('sha256').update(JSON.stringify(['handoff', ...asked])).digest('hex');
    const id = handoffDeliveryId(request.request_id);
    if (!(await mayHandOffTo(this.options.places, request.channel_id)) && (await this.deliveries.find(id)) === undefined) {
      throw new InvalidRequestError(UNMAPPED_CHANNEL);
    }
    const stored = await this.deliveries.store({ request_id: id, kind: 'handoff', target, body: { content }, hash, supported: this.options.canSend });
    if (stored.existing) return { handoff: toSentHandoff(request.request_id, stored.row, now), existing: true };
    this.options.metrics?.accepted();
    const envelope = parseHandoffContent(content);
    return {
      handoff: {
        request_id: request.request_id,
        event_id: envelope?.event_id ?? '',
        state: this.options.canSend ? 'pending' : 'failed',
        target_bot_id: request.target_bot_id,
        channel_id: request.channel_id,
        expires_at: new Date(expiresAt * 1000).toISOString(),
        created_at: stored.createdAt.toISOString(),
        ...(this.options.canSend ? {} : { code: 'CAPABILITY_UNAVAILABLE' as const }),
      },
      existing: false,
    };
  }

  /** A handoff this bot sent, by its request_id. */
  async get(requestId: string): Promise<SentHandoff> {
    const row = await this.deliveries.find(handoffDeliveryId(requestId));
    if (row === undefined || row.kind !== 'handoff') throw new NotFoundError('unknown request_id');
    return toSentHandoff(requestId, row, this.clock.now());
  }

  /**
   * A message someone else wrote where this bot can see it. A non-candidate is an ordinary message
   * (ignored here); a candidate that fails a check is logged and counted with its reason, never
   * shown to the agent; a valid one is taken in by the database's replay, capacity and rate rules.
   */
  async receive(message: InboundMessage, path: ReceiptPath = 'live'): Promise<'not_candidate' | 'accepted' | RejectReason> {
    if (!this.enabled) return 'not_candidate';
    const now = this.clock.now();
    const limits = this.options.limits;
    const verdict = validateHandoff(
      { authorId: message.authorId, authorIsBot: message.authorIsBot, channelId: message.channelId, content: message.content },
      { selfId: await this.options.selfId(), trusted: this.trusted, nowSeconds: Math.floor(now.getTime() / 1000), maxExpirySeconds: limits.maxExpirySeconds, maxPayloadBytes: limits.maxPayloadBytes },
    );
    if (verdict.kind === 'not_candidate') return 'not_candidate';
    // Ids and the reason only: never the message's content.
    const about = { author_id: message.authorId, channel_id: message.channelId, message_id: message.messageId };
    if (verdict.kind === 'rejected') return this.refused(verdict.reason, about);
    const e = verdict.envelope;
    const result = await recordReceipt(
      this.db,
      {
        event_id: e.event_id,
        source_bot_id: e.source_bot_id,
        origin_channel_id: e.origin_channel_id,
        origin_thread_id: e.origin_thread_id,
        origin_message_id: e.origin_message_id,
        handoff_message_id: message.messageId,
        text: e.payload.text,
        received_at: now,
        expires_at: new Date(e.expires_at * 1000),
      },
      now,
      { capacity: limits.replayCapacity, rateLimit: limits.rateLimit, rateWindowMs: limits.rateWindowSeconds * 1000 },
    );
    if (result.outcome === 'replay' && (result.sameMessage || path === 'catch-up')) {
      // This message seen again (a sweep, a retry whose answer was lost), or a replay found while
      // catching up (the live stream, if it saw it, said so): quiet, no refusal counted.
      this.options.log.debug({ ...about, event_id: e.event_id, path, same_message: result.sameMessage }, 'handoff already taken in');
      return 'replay';
    }
    if (result.outcome !== 'accepted') return this.refused(result.outcome, { ...about, event_id: e.event_id });
    this.options.metrics?.receipt('accepted');
    this.options.log.info({ ...about, event_id: e.event_id, inbox_id: result.inboxId, path }, 'handoff accepted');
    if (this.options.publish !== undefined) this.options.publish();
    else this.arrived();
    return 'accepted';
  }

  /** A handoff arrived in the inbox (committed, here or on another replica): waiting requests look now. */
  arrived(): void {
    this.arrivals.emit('arrived');
  }

  /** Receive from the live stream, retrying a transient failure in the background (for the gateway's listener). */
  take(message: InboundMessage): void {
    this.admit(message, 'live');
  }

  /**
   * The one receipt path, live or catching up: once per message on this process (a message seen
   * again joins its receipt), retried with backoff while it fails for a transient reason (the
   * database unreachable) until its envelope expires; a refusal is final.
   */
  admit(message: InboundMessage, path: ReceiptPath): Receipt {
    const known = this.receipts.get(message.messageId);
    if (known !== undefined) return known;
    let tried: () => void = () => undefined;
    const firstTry = new Promise<void>((resolve) => (tried = resolve));
    const receipt: Receipt = {
      done: false,
      firstTry,
      settled: this.receiveRetrying(message, path, () => tried()).then((settled) => {
        if (settled) receipt.done = true;
        // Given up: forgotten, so a later sweep (here or after a takeover) tries it afresh.
        else if (this.receipts.get(message.messageId) === receipt) this.receipts.delete(message.messageId);
        tried();
        return settled;
      }),
    };
    this.receipts.set(message.messageId, receipt);
    this.forgetOldest();
    return receipt;
  }

  /** Stop retrying (the process is closing): a later sweep, here or on another replica, takes over. */
  close(): void {
    this.closing.abort();
  }

  private async receiveRetrying(message: InboundMessage, path: ReceiptPath, tried: () => void): Promise<boolean> {
    // Until the envelope expires (never past the longest expiry this bot accepts).
    const expiresAt: unknown = parseHandoffContent(message.content)?.expires_at;
    const now = this.clock.now().getTime();
    const deadline = typeof expiresAt === 'number' && Number.isFinite(expiresAt) ? Math.min(expiresAt * 1000, now + this.options.limits.maxExpirySeconds * 1000) : now + RETRY_WITHOUT_EXPIRY_MS;
    let wait = RETRY_FIRST_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.receive(message, path);
        return true;
      } catch (err) {
        tried();
        const about = { err: errorSummary(err), message_id: message.messageId, channel_id: message.channelId, path, attempt };
        if (this.closing.signal.aborted) {
          this.options.log.warn(about, 'handoff could not be taken in; closing, left to the next catch-up');
          return false;
        }
        if (this.clock.now().getTime() + wait >= deadline) {
          this.options.log.error(about, 'handoff could not be taken in before it expired; given up');
          return false;
        }
        this.options.log.warn({ ...about, retry_in_ms: wait }, 'handoff could not be taken in; retrying');
        await sleep(wait, this.closing.signal);
        wait = Math.min(wait * 2, RETRY_MOST_MS);
      }
    }
  }

  /** Keep the memory of seen messages bounded: forget the oldest settled ones. */
  private forgetOldest(): void {
    if (this.receipts.size <= REMEMBERED_MESSAGES) return;
    for (const [id, r] of this.receipts) {
      if (this.receipts.size <= REMEMBERED_MESSAGES) return;
      if (r.done) this.receipts.delete(id);
    }
  }

  private refused(reason: RejectReason, about: Record<string, string>): RejectReason {
    this.options.metrics?.receipt(reason);
    this.options.log.warn({ ...about, reason }, 'handoff refused');
    return reason;
  }

  /** Unacknowledged handoffs after the cursor, oldest first. */
  async list(after: string | undefined, limit: number): Promise<{ items: InboxHandoff[]; next_cursor: string | null }> {
    const rows = await listInbox(this.db, after ?? '0', limit);
    const items = rows.map(toInboxHandoff);
    return { items, next_cursor: items.at(-1)?.id ?? null };
  }

  /** The first unacknowledged handoff after the cursor, waiting up to `timeoutMs` for one. */
  async next(after: string | undefined, timeoutMs: number, signal?: AbortSignal): Promise<InboxHandoff | null> {
    const deadline = Date.now() + Math.min(Math.max(0, timeoutMs), MAX_WAIT_MS);
    for (;;) {
      const [first] = await listInbox(this.db, after ?? '0', 1);
      if (first !== undefined) return toInboxHandoff(first);
      const left = deadline - Date.now();
      if (left <= 0 || signal?.aborted === true) return null;
      // Woken by news of an arrival (on any replica), or by the poll should that news be lost.
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          this.arrivals.off('arrived', done);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, Math.min(left, this.options.waitPollMs ?? WAIT_POLL_MS));
        this.arrivals.on('arrived', done);
        signal?.addEventListener('abort', done);
      });
    }
  }

  /** Accepted handoffs after an inbox id, acknowledged or not, oldest first (the inbound inbox's port). */
  acceptedSince(after: string, limit: number): Promise<HandoffInboxRow[]> {
    return acceptedSince(this.db, after, limit);
  }

  /** Whether this message is the handoffs' to decide (a candidate while handoffs are on): the inbox leaves it to them. */
  claims(message: InboundMessage): boolean {
    return this.enabled && isCandidate({ authorId: message.authorId, authorIsBot: message.authorIsBot, channelId: message.channelId, content: message.content });
  }

  /** Acknowledge handled handoffs; how many were acknowledged now. */
  ack(ids: readonly string[]): Promise<number> {
    return acknowledge(this.db, ids, this.clock.now());
  }
}

/** Wait `ms`, or until `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}

/** A sent handoff as the agent sees it: the envelope's event and expiry, the delivery's state. */
function toSentHandoff(requestId: string, row: DeliveryRow, now: Date): SentHandoff {
  const target = row.target as HandoffTarget;
  const envelope = parseHandoffContent(row.body.content ?? '');
  const state = wireStatus(row, now);
  const sent: SentHandoff = {
    request_id: requestId,
    event_id: envelope?.event_id ?? '',
    state,
    target_bot_id: target.target_bot_id,
    channel_id: target.channel_id,
    expires_at: new Date((envelope?.expires_at ?? 0) * 1000).toISOString(),
    created_at: row.created_at.toISOString(),
  };
  if (state === 'delivered' && row.url !== null) sent.url = row.url;
  if (state === 'failed') sent.code = row.failure_code ?? 'UPSTREAM_UNAVAILABLE';
  return sent;
}

function toInboxHandoff(row: HandoffInboxRow): InboxHandoff {
  return {
    id: row.id,
    event_id: row.event_id,
    source_bot_id: row.source_bot_id,
    origin: { channel_id: row.origin_channel_id, thread_id: row.origin_thread_id, message_id: row.origin_message_id, handoff_message_id: row.handoff_message_id },
    text: row.text,
    received_at: row.received_at.toISOString(),
    expires_at: row.expires_at.toISOString(),
  };
}

