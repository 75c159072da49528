import type { EnvReader } from '../../infra/env.js';

/** `run_command`'s switch and limits, read by this module (src/modules/contract.ts `config`). */
export interface CommandLimits {
  /** `HERALD_COMMAND_EXECUTION_ENABLED`: `true` lets `run_command` execute; otherwise it only validates. Default false. */
  readonly executionEnabled: boolean;
  /** `HERALD_COMMAND_TIMEOUT_MS`: how long a run waits for its command; a later one still finishes and is stored. Default 45 s. */
  readonly timeoutMs: number;
  /** `HERALD_COMMAND_CONCURRENCY`: commands one process executes at once (a timed-out one keeps its slot). Default 4. */
  readonly concurrency: number;
  /** `HERALD_COMMAND_MAX_LENGTH`: longest command text (and messageContent). Default 2000. */
  readonly maxLength: number;
  /** `HERALD_COMMAND_MAX_OUTPUTS`: captured outputs kept per run. Default 100. */
  readonly maxOutputs: number;
  /** `HERALD_COMMAND_MAX_OUTPUT_BYTES`: captured output bytes kept per run. Default 2 MiB. */
  readonly maxOutputBytes: number;
  /** `HERALD_COMMAND_IDEMPOTENCY_MINUTES`: how long an execute's result is replayed for its key. Default 10. */
  readonly idempotencyMinutes: number;
  /**
   * `HERALD_COMMAND_SOURCE_MAX_AGE_SECONDS`: how old an execute's source message (the user's own
   * message asking for it) may be, by Discord's timestamp against Herald's clock; older ones are
   * refused. A message is consent to one command, given now, not a standing permission. Default
   * 300 (5 minutes), at most `COMMAND_SOURCE_MAX_AGE_LIMIT_SECONDS`.
   */
  readonly sourceMaxAgeSeconds: number;
}

/** The longest source-message window an operator may set; claimed messages are kept this long. */
export const COMMAND_SOURCE_MAX_AGE_LIMIT_SECONDS = 3_600;

export function readCommandLimits(read: EnvReader): CommandLimits {
  return Object.freeze({
    executionEnabled: read.trueFalse('HERALD_COMMAND_EXECUTION_ENABLED', false),
    timeoutMs: read.int('HERALD_COMMAND_TIMEOUT_MS', 45_000, 100, 3_600_000),
    concurrency: read.int('HERALD_COMMAND_CONCURRENCY', 4, 1, 256),
    maxLength: read.int('HERALD_COMMAND_MAX_LENGTH', 2_000, 1, 4_000),
    maxOutputs: read.int('HERALD_COMMAND_MAX_OUTPUTS', 100, 1, 10_000),
    maxOutputBytes: read.int('HERALD_COMMAND_MAX_OUTPUT_BYTES', 2 * 1024 * 1024, 1, 64 * 1024 * 1024),
    idempotencyMinutes: read.int('HERALD_COMMAND_IDEMPOTENCY_MINUTES', 10, 1, 7 * 24 * 60),
    sourceMaxAgeSeconds: read.int('HERALD_COMMAND_SOURCE_MAX_AGE_SECONDS', 300, 1, COMMAND_SOURCE_MAX_AGE_LIMIT_SECONDS),
  });
}
