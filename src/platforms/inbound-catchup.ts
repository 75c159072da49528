import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import type { Clock } from '../infra/clock.js';
import { errorSummary } from '../infra/errors.js';
import type { InboundHistory, InboundMessage } from './platform.js';

/**
 * Messages younger than this are read again by the next sweep (progress stops before them): a
 * message with a slightly older id may still become visible after a newer one was listed.
 */
const SETTLE_MARGIN_MS = 5_000;
/** Pages read per channel per sweep at most; the rest waits for the next sweep. */
const MAX_PAGES = 50;

/** One message's receipt: `done` once settled; `firstTry` resolves after the first attempt. */
export interface CatchUpReceipt {
  readonly done: boolean;
  readonly firstTry: Promise<void>;
}

export interface InboundCatchUpOptions {
  /** The platform's reading of recent messages (its `Inbound.recent`). */
  recent: InboundHistory;
  /** The channels to read (default: every channel the platform says messages can reach Herald in). */
  channels?: (signal: AbortSignal) => Promise<string[]>;
  /** Per-channel progress (channel id → the message every one up to was settled). */
  cursors(channelIds: readonly string[]): Promise<Map<string, string>>;
  saveCursor(channelId: string, afterId: string): Promise<void>;
  /** The oldest moment worth reading in a channel now (where a sweep without progress starts). */
  from(channelId: string, now: Date): Date;
  /** The receipt path every message read goes through (the same as the live stream's). */
  admit(message: InboundMessage): CatchUpReceipt;
  clock: Clock;
  log: Logger;
  /** What is catching up, for the log. */
  what: string;
  everyMs: number;
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
 * Catching up on what the live stream missed (the gateway not held at the time, its holder killed
 * mid-receipt): when this process starts holding the live stream and then every `everyMs` while it
 * holds it, read the channels' history after each one's progress and feed each message through the
 * same receipt path as the live stream. Progress is kept in the database, so a sweep reads only what
 * is new, and another replica taking the stream over goes on from there. Handoffs and the inbound
 * inbox each run one, with their own channels, progress and receipt.
 */
export class InboundCatchUp {
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private running: Promise<SweepResult | undefined> | undefined;
  private again = false;
  private readonly stop = new AbortController();

  constructor(private readonly o: InboundCatchUpOptions) {}

  /** Sweep on every start of holding the live stream, and periodically while holding it. */
  start(): void {
    this.unsubscribe = this.o.recent.onHeld(() => this.kick());
    this.timer = setInterval(() => {
      if (this.o.recent.held()) this.kick();
    }, this.o.everyMs);
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
  kick(): void {
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.sweep()
      .catch((err: unknown) => {
        if (!this.stop.signal.aborted) this.o.log.warn({ err: errorSummary(err) }, `${this.o.what} catch-up failed; trying again later`);
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

  /** One sweep over every channel. */
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
    const channels = await (this.o.channels ?? ((s: AbortSignal) => this.o.recent.channels(s)))(signal);
    const cursors = await this.o.cursors(channels);
    const result: SweepResult = { channels: channels.length, read: 0, unsettled: 0 };
    for (const channelId of channels) {
      if (signal.aborted) break;
      try {
        await this.sweepChannel(channelId, cursors.get(channelId), this.o.from(channelId, started), started, result, signal);
      } catch (err) {
        // One channel failing (gone, no access, the platform unreachable) does not stop the others.
        if (!signal.aborted) this.o.log.debug({ channel_id: channelId, err: errorSummary(err) }, `${this.o.what} catch-up could not read a channel`);
      }
    }
    this.o.log.debug({ ...result }, `${this.o.what} catch-up swept`);
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
        const receipt = this.o.admit(message);
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
    if (progress !== undefined && progress !== cursor) await this.o.saveCursor(channelId, progress);
  }
}
