/**
 * The handoff wire format (`openab.multibot.handoff.v1`), interoperable with other bots
 * that speak it: a Discord message whose content is `<@TARGET_BOT_ID>` + `\n` + one JSON object with every
 * key always present and ids as decimal strings. Pure functions: building an envelope for a send,
 * and classifying and validating a received message, first failure wins.
 */

export const HANDOFF_SCHEMA = 'openab.multibot.handoff.v1';
/** Discord's limit on a message's content, in UTF-16 code units: a handoff is never truncated or split. */
export const MAX_MESSAGE_UNITS = 2000;

export interface HandoffEnvelope {
  schema: typeof HANDOFF_SCHEMA;
  source_bot_id: string;
  target_bot_id: string;
  event_id: string;
  origin_channel_id: string;
  origin_thread_id: string | null;
  origin_message_id: string | null;
  /** Unix seconds. */
  expires_at: number;
  hop_count: 0;
  payload: { text: string };
}

/** A Discord id as a decimal string. */
const SNOWFLAKE = /^[1-9][0-9]{16,19}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The first line of a candidate: one user mention. */
const MENTION_LINE = /^<@!?[0-9]+>$/;
/** The body names the handoff schema family (any version: a wrong one fails validation, loudly). */
const NAMES_SCHEMA = /"schema"\s*:\s*"openab\.multibot\.handoff\./;

export function isSnowflake(value: unknown): value is string {
  return typeof value === 'string' && SNOWFLAKE.test(value);
}

/** The message a handoff is sent as: the target's mention on its own line, then the envelope. */
export function handoffContent(envelope: HandoffEnvelope): string {
  // Keys in the wire format's order, every one present.
  const ordered: HandoffEnvelope = {
    schema: envelope.schema,
    source_bot_id: envelope.source_bot_id,
    target_bot_id: envelope.target_bot_id,
    event_id: envelope.event_id,
    origin_channel_id: envelope.origin_channel_id,
    origin_thread_id: envelope.origin_thread_id,
    origin_message_id: envelope.origin_message_id,
    expires_at: envelope.expires_at,
    hop_count: 0,
    payload: { text: envelope.payload.text },
  };
  return `<@${envelope.target_bot_id}>\n${JSON.stringify(ordered)}`;
}

/** The envelope of a handoff message Herald built (its stored content), or undefined if it is not one. */
export function parseHandoffContent(content: string): HandoffEnvelope | undefined {
  const newline = content.indexOf('\n');
  if (newline < 0) return undefined;
  try {
    const value: unknown = JSON.parse(content.slice(newline + 1));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as HandoffEnvelope) : undefined;
  } catch {
    return undefined;
  }
}

/** A message as the receiving side sees it. */
export interface ReceivedMessage {
  authorId: string;
  authorIsBot: boolean;
  channelId: string;
  content: string;
}

/** Why a candidate was refused; logged and counted, never shown to an agent. */
export type RejectReason =
  | 'not_json'
  | 'ids'
  | 'schema'
  | 'source_mismatch'
  | 'self_source'
  | 'untrusted_source'
  | 'wrong_target'
  | 'target_header'
  | 'event_id'
  | 'expired'
  | 'expires_too_late'
  | 'hop_count'
  | 'provenance'
  | 'payload'
  // Decided in the database (handoff.repository.ts), after the checks here.
  | 'replay'
  | 'replay_capacity'
  | 'rate_limited';

export const REJECT_REASONS: readonly RejectReason[] = [
  'not_json',
  'ids',
  'schema',
  'source_mismatch',
  'self_source',
  'untrusted_source',
  'wrong_target',
  'target_header',
  'event_id',
  'expired',
  'expires_too_late',
  'hop_count',
  'provenance',
  'payload',
  'replay',
  'replay_capacity',
  'rate_limited',
];

export interface ReceiveLimits {
  /** This bot's own user id. */
  selfId: string;
  trusted: ReadonlySet<string>;
  /** Unix seconds. */
  nowSeconds: number;
  /** Latest acceptable `expires_at`, from now (default 3600 s). */
  maxExpirySeconds: number;
  /** Largest payload text in UTF-8 bytes (default 100,000). */
  maxPayloadBytes: number;
}

export type Verdict = { kind: 'not_candidate' } | { kind: 'rejected'; reason: RejectReason } | { kind: 'valid'; envelope: HandoffEnvelope };

/**
 * A candidate is a message a bot wrote whose first line is a user mention and whose body starts
 * with `{` and names the schema; anything else is an ordinary message, never a handoff. Prose that
 * merely mentions the schema does not start with `{`.
 */
export function isCandidate(message: ReceivedMessage): boolean {
  if (!message.authorIsBot) return false;
  const newline = message.content.indexOf('\n');
  if (newline < 0) return false;
  const header = message.content.slice(0, newline);
  const body = message.content.slice(newline + 1);
  return MENTION_LINE.test(header) && body.startsWith('{') && NAMES_SCHEMA.test(body);
}

/**
 * Classify and validate a received message, in the order (first failure wins). Only a
 * `valid` verdict's envelope may be used; replay, capacity and rate are the database's to decide.
 */
export function validateHandoff(message: ReceivedMessage, limits: ReceiveLimits): Verdict {
  if (!isCandidate(message)) return { kind: 'not_candidate' };
  const newline = message.content.indexOf('\n');
  const header = message.content.slice(0, newline);
  let parsed: unknown;
  try {
    parsed = JSON.parse(message.content.slice(newline + 1));
  } catch {
    return reject('not_json');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return reject('not_json');
  const e = parsed as Record<string, unknown>;
  const nullOrSnowflake = (v: unknown): boolean => v === null || isSnowflake(v);
  if (!isSnowflake(e['source_bot_id']) || !isSnowflake(e['target_bot_id']) || !isSnowflake(e['origin_channel_id']) || !nullOrSnowflake(e['origin_thread_id']) || !nullOrSnowflake(e['origin_message_id'])) {
    return reject('ids');
  }
  if (e['schema'] !== HANDOFF_SCHEMA) return reject('schema');
  const source = e['source_bot_id'];
  if (source !== message.authorId) return reject('source_mismatch');
  if (source === limits.selfId) return reject('self_source');
  if (!limits.trusted.has(source)) return reject('untrusted_source');
  if (e['target_bot_id'] !== limits.selfId) return reject('wrong_target');
  if (header !== `<@${limits.selfId}>`) return reject('target_header');
  const eventId = e['event_id'];
  if (typeof eventId !== 'string' || eventId.length > 64 || !UUID.test(eventId)) return reject('event_id');
  const expiresAt = e['expires_at'];
  if (typeof expiresAt !== 'number' || !Number.isInteger(expiresAt) || expiresAt <= limits.nowSeconds) return reject('expired');
  if (expiresAt > limits.nowSeconds + limits.maxExpirySeconds) return reject('expires_too_late');
  if (e['hop_count'] !== 0) return reject('hop_count');
  const thread = e['origin_thread_id'];
  if (e['origin_channel_id'] !== message.channelId || (thread !== null && thread !== message.channelId)) return reject('provenance');
  const payload = e['payload'];
  const text = typeof payload === 'object' && payload !== null && !Array.isArray(payload) ? (payload as Record<string, unknown>)['text'] : undefined;
  // U+0000 cannot be stored (PostgreSQL's text refuses it): such a payload is refused, not a failed insert.
  if (typeof text !== 'string' || text.length === 0 || text.includes('\u0000') || Buffer.byteLength(text, 'utf8') > limits.maxPayloadBytes) return reject('payload');
  return {
    kind: 'valid',
    envelope: {
      schema: HANDOFF_SCHEMA,
      source_bot_id: source,
      target_bot_id: limits.selfId,
      // A UUID names one event whatever its case (RFC 9562 §4): the replay check compares this canonical form.
      event_id: eventId.toLowerCase(),
      origin_channel_id: message.channelId,
      origin_thread_id: thread as string | null,
      origin_message_id: e['origin_message_id'] as string | null,
      expires_at: expiresAt,
      hop_count: 0,
      payload: { text },
    },
  };
}

function reject(reason: RejectReason): Verdict {
  return { kind: 'rejected', reason };
}
