import type { EnvReader } from '../../infra/env.js';

/** The media archive's storage limit and download cap, read by this module (src/modules/contract.ts `config`). */
export interface MediaLimits {
  /** `HERALD_MEDIA_LIMIT_BYTES`: bytes the archive may store under HERALD_DATA_DIR/media. Default 10 GiB. */
  readonly limitBytes: number;
  /** `HERALD_MEDIA_WARN_PERCENT`: from this share of the limit, a new scrape needs `confirm: true`. Default 80. */
  readonly warnPercent: number;
  /** `HERALD_MEDIA_OVERRUN_PERCENT`: at this share of the limit, running download scrapes pause. Default 100. */
  readonly overrunPercent: number;
  /** `HERALD_MEDIA_MAX_FILE_BYTES`: largest single file a download scrape stores. Default 50 MiB. */
  readonly maxFileBytes: number;
}

export function readMediaLimits(read: EnvReader): MediaLimits {
  const limits = Object.freeze({
    limitBytes: read.int('HERALD_MEDIA_LIMIT_BYTES', 10 * 1024 ** 3, 0, Number.MAX_SAFE_INTEGER),
    warnPercent: read.int('HERALD_MEDIA_WARN_PERCENT', 80, 1, 100),
    overrunPercent: read.int('HERALD_MEDIA_OVERRUN_PERCENT', 100, 1, 200),
    maxFileBytes: read.int('HERALD_MEDIA_MAX_FILE_BYTES', 50 * 1024 ** 2, 1, Number.MAX_SAFE_INTEGER),
  });
  if (limits.warnPercent > limits.overrunPercent) read.problem('HERALD_MEDIA_WARN_PERCENT must not be above HERALD_MEDIA_OVERRUN_PERCENT');
  return limits;
}
