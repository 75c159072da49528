import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Clock } from '../../infra/clock.js';
import { InboundCatchUp } from '../../platforms/inbound-catchup.js';
import type { InboundHistory, InboundMessage } from '../../platforms/platform.js';
import { catchupCursors, saveCatchupCursor } from './handoff.repository.js';
import type { Receipt, ReceiptPath } from './handoff.service.js';
import type { HandoffsDb } from './handoff.table.js';

/** How often the holder of the live stream catches up while it holds it. */
export const CATCHUP_EVERY_MS = 30_000;

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

export type { SweepResult } from '../../platforms/inbound-catchup.js';

/**
 * Catching up on handoffs the live stream missed (src/platforms/inbound-catchup.ts): every channel
 * where handoffs can reach this bot, back to the oldest moment an unexpired one could have been
 * posted, each message through the same receipt path as the live stream; per-channel progress in
 * handoff_catchup. What it reads again is known (quietly a replay).
 */
export class HandoffCatchUp extends InboundCatchUp {
  constructor(o: CatchUpOptions) {
    super({
      recent: o.recent,
      cursors: (channels) => catchupCursors(o.db, channels),
      saveCursor: (channelId, afterId) => saveCatchupCursor(o.db, channelId, afterId, o.clock.now()),
      from: (_channel, now) => new Date(now.getTime() - o.maxExpirySeconds * 1000),
      admit: (message) => o.admit(message, 'catch-up'),
      clock: o.clock,
      log: o.log,
      what: 'handoff',
      everyMs: o.everyMs ?? CATCHUP_EVERY_MS,
    });
  }
}
