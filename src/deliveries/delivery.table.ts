import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { DeliveryKind, FailureCode, MessageBody, Target } from './delivery.js';

/** `pending` → `in_flight` (leased) → `delivered` | `failed`; an expired lease reads as `unknown`. */
export type DeliveryStatus = 'pending' | 'in_flight' | 'delivered' | 'failed';

export interface DeliveryTable {
  request_id: string;
  kind: DeliveryKind;
  target: ColumnType<Target, string, string>;
  body: ColumnType<MessageBody, string, string>;
  payload_hash: string;
  status: DeliveryStatus;
  failure_code: FailureCode | null;
  created_at: Date;
  next_attempt_at: Date;
  attempts: Generated<number>;
  first_attempt_at: Date | null;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  channel_id: string | null;
  message_id: string | null;
  url: string | null;
  applied: boolean | null;
  last_applied_seq: number | null;
  /** On an original: which dispatcher is applying an edit to it, until when. */
  edit_lock_owner: string | null;
  edit_lock_expires_at: Date | null;
}

export type DeliveryRow = Selectable<DeliveryTable>;
export type NewDeliveryRow = Insertable<DeliveryTable>;
export type DeliveryUpdate = Updateable<DeliveryTable>;
