import type { EnvReader } from '../../infra/env.js';

/** Files out and in (uploads, attachments fetched for agents), read by this module (src/modules/contract.ts `config`). */
export interface FileStoreLimits {
  /** `HERALD_FILE_MAX_BYTES`: largest file `POST /mcp/files` stores (and an attachment fetched for an agent). Default 25 MiB. */
  readonly maxBytes: number;
  /** `HERALD_FILE_TTL_HOURS`: hours after its last use that a file no delivery lists is deleted. Default 24. */
  readonly ttlHours: number;
}

export function readFileStoreLimits(read: EnvReader): FileStoreLimits {
  return Object.freeze({
    maxBytes: read.int('HERALD_FILE_MAX_BYTES', 25 * 1024 ** 2, 1, Number.MAX_SAFE_INTEGER),
    ttlHours: read.int('HERALD_FILE_TTL_HOURS', 24, 1, 24 * 365),
  });
}
