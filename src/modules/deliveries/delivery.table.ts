import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { TransportName } from '../../platforms/platform.js';
import type { DeliveryStatus, FailureCode, MessageBody, StoredKind, Target } from './delivery.js';

/**
 * `pending` → `in_flight` (leased) → `delivered` | `failed` | `unknown`. An expired lease also reads
 * as `unknown` (and is re-driven); a stored `unknown` means Herald could not tell whether the platform
 * created the message (see `reason`), and waits for the connector to re-POST. `unconfirmed` (chat
 * sends only): written, but the platform gives no proof; never sent again.
 */
export type { DeliveryStatus } from './delivery.js';

export interface DeliveryTable {
  request_id: string;
  kind: StoredKind;
  target: ColumnType<Target, string, string>;
  body: ColumnType<MessageBody, string, string>;
  payload_hash: string;
  status: DeliveryStatus;
  failure_code: FailureCode | null;
  created_at: Date;
  next_attempt_at: Date;
  attempts: Generated<number>;
  /** When the current (or last) attempt was claimed. */
  attempt_started_at: Date | null;
  /**
   * Set while a create may have reached the platform unanswered: the message, if any, was created
   * between `doubt_from` and `doubt_until`, in `doubt_channel_id` (null: the channel the target maps to).
   */
  doubt_from: Date | null;
  doubt_until: Date | null;
  doubt_channel_id: string | null;
  /** The platform its message went to (or may have): edits and reconciliation go there. */
  transport: TransportName | null;
  /** The identity it is sent as (src/infra/policy/identity.ts), the caller's; null: the default. */
  identity: string | null;
  /** For operators: why a delivery ended `unknown` or `failed`. Never on the wire. */
  reason: string | null;
  lease_owner: string | null;
  /** Written by each claim (src/outbox/leased-table.ts): an outcome is written only under the claim that holds the row. */
  lease_token: string | null;
  lease_expires_at: Date | null;
  channel_id: string | null;
  message_id: string | null;
  /** A chat send's platform message ids, one per line in order (a JSON array). */
  message_ids: string | null;
  url: string | null;
  applied: boolean | null;
  last_applied_seq: number | null;
  /** On an original: the edit (its request id) whose seq `last_applied_seq` records. */
  last_applied_by: string | null;
  /** On an original: which dispatcher is applying an edit to it, until when. */
  edit_lock_owner: string | null;
  edit_lock_expires_at: Date | null;
}

export type DeliveryRow = Selectable<DeliveryTable>;
export type NewDeliveryRow = Insertable<DeliveryTable>;
export type DeliveryUpdate = Updateable<DeliveryTable>;

/** Which message a nonce created, as the platform's gateway reported it. */
export interface SentMessageTable {
  nonce: string;
  channel_id: string;
  message_id: string;
  created_at: Date;
}

/**
 * A post or DM a caller of the API sent (`herald mcp`'s records, per principal: `connector` or
 * `client:<id>`, principalName in src/infra/policy/principal.ts), with the last edit seq it took.
 */
export interface AgentMessageTable {
  principal: string;
  request_id: string;
  kind: 'post' | 'dm';
  seq: number;
  sent_at: Date;
}

/** The seq an edit id took: the same edit again is the same request. */
export interface AgentMessageEditTable {
  principal: string;
  request_id: string;
  edit_id: string;
  seq: number;
  at: Date;
}

/** A request_id a caller claimed before sending it (an OAuth client's: its retry is its own replay). */
export interface AgentClaimTable {
  principal: string;
  request_id: string;
  claimed_at: Date;
}

/** This part's tables, as it sees the store (the whole schema is src/schema.ts, at the wiring). */
export interface DeliveriesDb {
  deliveries: DeliveryTable;
  sent_messages: SentMessageTable;
  agent_messages: AgentMessageTable;
  agent_message_edits: AgentMessageEditTable;
  agent_claims: AgentClaimTable;
}
