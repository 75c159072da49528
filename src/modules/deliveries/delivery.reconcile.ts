import type { Kysely } from 'kysely';
import type { Clock } from '../../infra/clock.js';
import type { SentMessage, Platform } from '../../platforms/platform.js';
import type { DeliveriesDb } from './delivery.table.js';
import { deliveryNonce } from './delivery.js';
import { RECONCILE_SKEW_MS } from './delivery.doubt.js';
import { findSentMessage, findUnresolvedTwins, recordedMessages, sentMessageNonces } from './delivery.repository.js';
import type { DeliveryRow } from './delivery.table.js';

/** What the proof of a delivery in doubt says: its message, none, look again soon, or cannot tell. */
export type Verdict = { kind: 'found'; message: SentMessage } | { kind: 'absent' } | { kind: 'wait' } | { kind: 'undecided'; reason: string };

/**
 * Reconciliation reads history only once the widened window has closed: a message Discord created
 * late (up to the skew after the doubt window) must already be there, or "absent" would be wrong.
 */
export const RECONCILE_SETTLE_MS = RECONCILE_SKEW_MS + 1_000;
/** How soon reconciliation looks again when a twin that may own the match is being attempted. */
export const TWIN_WAIT_MS = 1_000;
/** How many channel messages in the doubt window reconciliation reads at most. */
const RECONCILE_MAX_MESSAGES = 1000;

/** When and where a create may have happened without Herald learning its result. */
export interface Doubt {
  from: Date;
  until: Date;
  /** Null: the channel the target maps to (a process died before saying which). */
  channelId: string | null;
}


/**
 * Past the nonce window: if the gateway reported which message this delivery's nonce created,
 * that is it. Otherwise look for the in-doubt create's message in the channel: by this bot,
 * showing this body, created within the doubt window (widened by the skew). A message another
 * delivery recorded, or the gateway reported under another nonce, is not ours. While another unresolved delivery with the same body may have
 * created a message in that window, a match cannot be told apart from it: undecided, never a guess.
 */
export async function reconcile(db: Kysely<DeliveriesDb>, clock: Clock, row: DeliveryRow, signal: AbortSignal, transport: Platform, doubt: Doubt, channelId: string, thread?: string): Promise<Verdict> {
  const nonce = deliveryNonce(row.request_id);
  // The gateway told us which message this nonce created: that settles it exactly.
  const reported = await findSentMessage(db, nonce);
  if (reported !== undefined) return { kind: 'found', message: { channelId: reported.channel_id, messageId: reported.message_id } };
  const from = new Date(doubt.from.getTime() - RECONCILE_SKEW_MS);
  const until = new Date(doubt.until.getTime() + RECONCILE_SKEW_MS);
  if (transport.keyed !== undefined) {
    // The platform keeps the key with the message: an exact answer, with no content matching.
    const found = await transport.keyed.findByKey(channelId, nonce, from, until, signal, thread);
    if ('found' in found) return { kind: 'found', message: found.found };
    if ('absent' in found) return { kind: 'absent' };
    return { kind: 'undecided', reason: found.undecided };
  }
  const history = transport.history;
  if (history === undefined) return { kind: 'undecided', reason: `${transport.name} keeps no history to look the message up in` };
  const self = await history.selfId();
  const fingerprint = history.fingerprint(row.body);
  const seen = await history.listBetween(channelId, from, until, RECONCILE_MAX_MESSAGES, signal);
  if (!seen.complete) return { kind: 'undecided', reason: `more than ${RECONCILE_MAX_MESSAGES} messages in the channel during the doubt window` };
  const alike = seen.messages.filter((m) => m.authorId === self && m.fingerprint === fingerprint);
  if (alike.length === 0) return { kind: 'absent' };
  // Look for a twin before reading what is recorded: a twin recording its message in between
  // is then still counted as a twin (undecided), never missed.
  const twins = await findUnresolvedTwins(db, row.request_id, from, until);
  const ids = alike.map((m) => m.messageId);
  const taken = await recordedMessages(db, ids, row.request_id);
  // A message the gateway reported under another nonce is another delivery's, recorded or not.
  const nonces = await sentMessageNonces(db, ids);
  const ours = alike.filter((m) => !taken.has(m.messageId) && (nonces.get(m.messageId) ?? nonce) === nonce);
  if (ours.length === 0) return { kind: 'absent' };
  if (twins.length > 0) {
    // A twin sending right now, with no doubt of its own, records its message (or its doubt)
    // within its lease: look again then. Twins in doubt, like this one, would wait on each other
    // forever: they leave it undecided.
    const nowMs = clock.now().getTime();
    const live = twins.every((t) => t.status === 'in_flight' && t.doubt_from === null && (t.lease_expires_at?.getTime() ?? 0) > nowMs);
    if (live) return { kind: 'wait' };
    return { kind: 'undecided', reason: 'another unresolved delivery with the same content may own the matching message' };
  }
  if (ours.length > 1) return { kind: 'undecided', reason: `${ours.length} unrecorded messages with the same content in the doubt window` };
  const [message] = ours;
  return message === undefined ? { kind: 'absent' } : { kind: 'found', message };
}
