import type { EnvReader } from '../../infra/env.js';

/** Bot-to-bot handoffs: who may hand off to whom, and the limits, read by this module (src/modules/contract.ts `config`). */
export interface HandoffLimits {
  /**
   * `HERALD_TRUSTED_BOT_IDS`: comma-separated bot user ids this bot accepts handoffs from and may
   * hand off to. Empty (the default): handoffs are off, both ways.
   */
  readonly trustedBotIds: readonly string[];
  /** `HERALD_HANDOFF_TTL_SECONDS`: a sent envelope's lifetime (`expires_at` = now + this; a request may ask for less). Default 300, at most 3600. */
  readonly ttlSeconds: number;
  /** `HERALD_HANDOFF_MAX_EXPIRY_SECONDS`: a received envelope expiring later than now + this is refused. Default 3600. */
  readonly maxExpirySeconds: number;
  /** `HERALD_HANDOFF_MAX_PAYLOAD_BYTES`: largest received payload text, UTF-8 bytes. Default 100000. */
  readonly maxPayloadBytes: number;
  /** `HERALD_HANDOFF_REPLAY_CAPACITY`: live replay entries at most; when full, new handoffs are refused (fail closed). Default 4096. */
  readonly replayCapacity: number;
  /** `HERALD_HANDOFF_RATE_LIMIT`: accepted handoffs per source bot per window. Default 10. */
  readonly rateLimit: number;
  /** `HERALD_HANDOFF_RATE_WINDOW_SECONDS`: the rate limit's window. Default 60. */
  readonly rateWindowSeconds: number;
}

const BOT_ID = /^[1-9][0-9]{16,19}$/;

export function readHandoffLimits(read: EnvReader): HandoffLimits {
  const list = read.list('HERALD_TRUSTED_BOT_IDS');
  const bad = list.filter((k) => !BOT_ID.test(k));
  if (bad.length > 0) read.problem(`HERALD_TRUSTED_BOT_IDS must be comma-separated Discord user ids (got ${bad.join(', ')})`);
  return Object.freeze({
    trustedBotIds: Object.freeze([...new Set(list.filter((k) => BOT_ID.test(k)))]),
    ttlSeconds: read.int('HERALD_HANDOFF_TTL_SECONDS', 300, 1, 3_600),
    maxExpirySeconds: read.int('HERALD_HANDOFF_MAX_EXPIRY_SECONDS', 3_600, 1, 86_400),
    maxPayloadBytes: read.int('HERALD_HANDOFF_MAX_PAYLOAD_BYTES', 100_000, 1, 10_000_000),
    replayCapacity: read.int('HERALD_HANDOFF_REPLAY_CAPACITY', 4_096, 1, 1_000_000),
    rateLimit: read.int('HERALD_HANDOFF_RATE_LIMIT', 10, 1, 100_000),
    rateWindowSeconds: read.int('HERALD_HANDOFF_RATE_WINDOW_SECONDS', 60, 1, 86_400),
  });
}
