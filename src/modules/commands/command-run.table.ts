import type { ColumnType, Selectable } from 'kysely';
import type { components } from '../../../generated/api.js';

export type CommandRunResult = components['schemas']['CommandRunResult'];

/** One execute by idempotency key: `running` until its command finishes (timed out or not), then `done` with the result. */
export interface CommandRunTable {
  idempotency_key: string;
  /** SHA-256 of the canonical invocation: the same key for another invocation is refused. */
  invocation_hash: string;
  status: 'running' | 'done';
  result: ColumnType<CommandRunResult | null, string | null, string | null>;
  created_at: Date;
  /** A done run is replayed until then; a running one whose process died frees its key then. */
  expires_at: Date;
}

export type CommandRunRow = Selectable<CommandRunTable>;

/**
 * A source message that authorised an execute: a message is consent to one command, so the first
 * execute naming it claims it and no other may. Kept until no freshness window could accept the
 * message again.
 */
export interface CommandSourceTable {
  source_message_id: string;
  /** The execute it authorised (the same key replays from `command_runs`, never claims again). */
  idempotency_key: string;
  claimed_at: Date;
  expires_at: Date;
}

/** This part's tables, as it sees the store (the whole schema is src/schema.ts, at the wiring). */
export interface CommandsDb {
  command_runs: CommandRunTable;
  command_sources: CommandSourceTable;
}
