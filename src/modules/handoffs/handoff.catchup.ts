import { setMaxListeners } from 'node:events';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Clock } from '../../platform/clock.js';
import { errorSummary } from '../../platform/errors.js';
import type { InboundHistory, InboundMessage } from '../../transports/transport.js';
import { catchupCursors, saveCatchupCursor } from './handoff.repository.js';
import type { Receipt, ReceiptPath } from './handoff.service.js';
import type { HandoffsDb } from './handoff.table.js';

/** How often the holder of the live stream catches up while it holds it. */
export const CATCHUP_EVERY_MS = 30_000;
/**
 * Messages younger than this are read again by the next sweep (progress stops before them): a
 * message with a slightly older id may still become visible after a newer one was listed.
 */
const SETTLE_MARGIN_MS = 5_000;
/** Pages read per channel per sweep at most; the rest waits for the next sweep. */
const MAX_PAGES = 50;

export interface CatchUpOptions {
  db: Kysely<HandoffsDb>;
  /** The platform's reading of recent messages (its `Inbound.recent`). */
  recent: InboundHistory;
  /** The receipt path every message goes through (`HandoffService.admit`). */
  admit: (message: InboundMessage, path: ReceiptPath) => Receipt;
  clock: Clock;
  log: Logger;
  /** HERALD_HANDOFF_MAX_EXPIRY_SECONDS: no unexpired handoff was posted longer ago than this. */
  maxExpirySeconds: number;
  everyMs?: number;
}

/** What one sweep did. */
export interface SweepResult {
  channels: number;
  /** Messages read from the platform. */
  read: number;
  /** Messages not settled yet (their receipt is still being retried): progress stops before them. */
  unsettled: number;
}

/**
 * Catching up on handoffs the live stream missed (the gateway not held at the time, its holder
 * killed while taking one in): when this process starts holding the live stream and then every
 * `everyMs` while it holds it, read the recent history of the channels where handoffs can reach
 * this bot, back to the oldest moment an unexpired one could have been posted, and feed each
 * message through the same receipt path as the live stream. Per-channel progress in the database
 * means a sweep reads only what is new; what it reads again is known (quietly a replay).
 */
export class HandoffCatchUp {
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private running: Promise<SweepResult | undefined> | undefined;
  private again = false;
  private readonly stop = new AbortController();

  constructor(private readonly o: CatchUpOptions) {}

  /** Sweep on every start of holding the live stream, and periodically while holding it. */
  start(): void {
    this.unsubscribe = this.o.recent.onHeld(() => this.kick());
    this.timer = setInterval(() => {
      if (this.o.recent.held()) this.kick();
    }, this.o.everyMs ?? CATCHUP_EVERY_MS);
    this.timer.unref();
    if (this.o.recent.held()) this.kick();
  }

  async close(): Promise<void> {
    this.unsubscribe?.();
    if (this.timer !== undefined) clearInterval(this.timer);
    this.stop.abort();
    await this.running?.catch(() => undefined);
  }

  /** Start a sweep now (one at a time; asked during one, another follows it). */
  private kick(): void {
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.sweep()
      .catch((err: unknown) => {
        if (!this.stop.signal.aborted) this.o.log.warn({ err: errorSummary(err) }, 'handoff catch-up failed; trying again later');
        return undefined;
      })
      .finally(() => {
        this.running = undefined;
        if (this.again && !this.stop.signal.aborted) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** One sweep over every channel where handoffs can reach this bot. */
  async sweep(): Promise<SweepResult> {
    // A signal of this sweep's own (its requests' listeners go with it), aborted on close.
    const aborter = new AbortController();
    setMaxListeners(0, aborter.signal);
    const abort = (): void => aborter.abort();
    this.stop.signal.addEventListener('abort', abort);
    try {
      return await this.sweepWith(aborter.signal);
    } finally {
      this.stop.signal.removeEventListener('abort', abort);
    }
  }

  private async sweepWith(signal: AbortSignal): Promise<SweepResult> {
    const started = this.o.clock.now();
    const from = new Date(started.getTime() - this.o.maxExpirySeconds * 1000);
    const channels = await this.o.recent.channels(signal);
    const cursors = await catchupCursors(this.o.db, channels);
    const result: SweepResult = { channels: channels.length, read: 0, unsettled: 0 };
    for (const channelId of channels) {
      if (signal.aborted) break;
      try {
        await this.sweepChannel(channelId, cursors.get(channelId), from, started, result, signal);
      } catch (err) {
        // One channel failing (gone, no access, Discord unreachable) does not stop the others.
        if (!signal.aborted) this.o.log.debug({ channel_id: channelId, err: errorSummary(err) }, 'handoff catch-up could not read a channel');
      }
    }
    this.o.log.debug({ ...result }, 'handoff catch-up swept');
    return result;
  }

  private async sweepChannel(channelId: string, cursor: string | undefined, from: Date, started: Date, result: SweepResult, signal: AbortSignal): Promise<void> {
    const settledBefore = started.getTime() - SETTLE_MARGIN_MS;
    let after = cursor;
    // The newest message up to which every one is settled (and old enough not to be overtaken).
    let progress = cursor;
    let blocked = false;
    for (let page = 0; page < MAX_PAGES && !signal.aborted; page++) {
      const { messages, last, complete } = await this.o.recent.since(channelId, after, from, signal);
      for (const message of messages) {
        result.read += 1;
        const receipt = this.o.admit(message, 'catch-up');
        await receipt.firstTry;
        if (!receipt.done) {
          result.unsettled += 1;
          blocked = true;
        }
        if (!blocked && message.createdAt.getTime() <= settledBefore) progress = message.messageId;
      }
      if (complete || last === undefined) break;
      after = last;
    }
    if (progress !== undefined && progress !== cursor) await saveCatchupCursor(this.o.db, channelId, progress, this.o.clock.now());
  }
}
