import { createHash } from 'node:crypto';
import type { components } from '../../../generated/api.js';

type Schemas = components['schemas'];
export type DeliveryKind = Schemas['DeliveryKind'];
export type Destination = Schemas['Destination'];
export type PostTarget = Schemas['PostTarget'];
export type DmTarget = Schemas['DmTarget'];
export type EditTarget = Schemas['EditTarget'];
/** A delete's target: Herald's own delivered post or DM, by its request_id. */
export type DeleteTarget = { message_ref: string };
/** A reaction's target, in one of its three forms (normalized: only that form's keys). */
export type ReactionTarget = { message_ref: string } | { guild_id: string; destination: Destination; message_id: string } | { user_id: string; message_id: string };
/** Where a `reply` goes: a channel, not a destination (Herald's own kind; connectors cannot send one). */
export type ReplyTarget = Schemas['ReplyTarget'];
/**
 * A sent handoff's target (the handoffs module): where the handoff message goes, and which bot it
 * is for (the only user it may mention).
 */
export interface HandoffTarget {
  channel_id: string;
  target_bot_id: string;
}
/** A chat send's target (the chat module): the platform, channel and sender its lines go as. */
export interface ChatTarget {
  transport: string;
  channel: string;
  sender: string;
}
export type Target = PostTarget | DmTarget | EditTarget | DeleteTarget | ReactionTarget | ReplyTarget | HandoffTarget | ChatTarget;
/**
 * Every kind the outbox stores: the protocol's, `reply` (a command's reply to its channel) and
 * `handoff` (a bot-to-bot handoff message) and `chat` (a chat tool's send, split into lines); the
 * last two never on the deliveries wire.
 */
export type StoredKind = DeliveryKind | 'reply' | 'handoff' | 'chat';
/** A body as stored and echoed: only the keys present, content, card, links. */
export type MessageBody = Schemas['WireBody'];
export type Card = Schemas['Card'];
export type Link = Schemas['Link'];
export type FailureCode = Schemas['FailureCode'];
export type DeliveryState = Schemas['DeliveryState'];
/** The admin API's view of a delivery (never its body). */
export type DeliveryDetail = Schemas['DeliveryDetail'];

/** Records (and so what can be edited) are kept 8 days by created_at, then pruned (docs/protocol.md §6). */
export const RETENTION_MS = 8 * 24 * 60 * 60 * 1000;

/** The protocol's destinations, in the order capabilities lists them. */
export const DESTINATIONS: readonly { destination: Destination; description: string }[] = [
  { destination: 'alerts', description: 'Time-sensitive findings and warnings' },
  { destination: 'deals', description: 'Notable deals or opportunities' },
  { destination: 'digest', description: 'Periodic summaries' },
  { destination: 'ops', description: 'Operational status and infrastructure notices' },
];

/** A validated request with unknown keys dropped and keys in the protocol's order. */
export type Delivery =
  | { request_id: string; kind: 'post'; target: PostTarget; body: MessageBody }
  | { request_id: string; kind: 'dm'; target: DmTarget; body: MessageBody }
  | { request_id: string; kind: 'edit'; target: EditTarget; body: MessageBody }
  | { request_id: string; kind: 'delete'; target: DeleteTarget; body: MessageBody }
  | { request_id: string; kind: 'reaction'; target: ReactionTarget; body: MessageBody };

/** A delivery Herald queues for itself, never from the protocol (a command's reply, responseMode discord). */
export interface Reply {
  request_id: string;
  kind: 'reply';
  target: ReplyTarget;
  body: MessageBody;
}

/** Rebuild a validated request with only the keys the protocol knows, in its order. */
export function normalizeDelivery(input: Record<string, unknown>): Delivery {
  const request_id = input['request_id'] as string;
  const t = input['target'] as Record<string, unknown>;
  if (input['kind'] === 'delete' || input['kind'] === 'reaction') return normalizeMessageOp(request_id, input['kind'], t, input['body']);
  const body = normalizeBody(input['body'] as Record<string, unknown>);
  switch (input['kind']) {
    case 'post':
      return { request_id, kind: 'post', target: { guild_id: t['guild_id'] as string, destination: t['destination'] as Destination, ...threadingOf(t, true) }, body };
    case 'dm':
      return { request_id, kind: 'dm', target: { user_id: t['user_id'] as string, ...threadingOf(t, false) }, body };
    default:
      return { request_id, kind: 'edit', target: { message_ref: t['message_ref'] as string, seq: t['seq'] as number }, body };
  }
}

/**
 * A post's or DM's `reply_to` (and a post's `thread_id`), only when given: a request without them
 * stores, hashes and echoes exactly as before they existed.
 */
function threadingOf(t: Record<string, unknown>, post: boolean): { reply_to?: string; thread_id?: string } {
  return {
    ...(t['reply_to'] !== undefined ? { reply_to: t['reply_to'] as string } : {}),
    ...(post && t['thread_id'] !== undefined ? { thread_id: t['thread_id'] as string } : {}),
  };
}

/** A delete or a reaction, rebuilt like the others. */
function normalizeMessageOp(request_id: string, kind: 'delete' | 'reaction', t: Record<string, unknown>, body: unknown): Delivery {
  // A delete has no body: whatever was given is dropped, so a retry hashes the same.
  if (kind === 'delete') return { request_id, kind, target: { message_ref: t['message_ref'] as string }, body: {} };
  return { request_id, kind, target: normalizeReactionTarget(t), body: normalizeReactionBody(body as Record<string, unknown>) };
}

/** The one form a reaction's target gives, in the contract's order of forms. */
function normalizeReactionTarget(t: Record<string, unknown>): ReactionTarget {
  if (t['message_ref'] !== undefined) return { message_ref: t['message_ref'] as string };
  if (t['guild_id'] !== undefined && t['destination'] !== undefined) {
    return { guild_id: t['guild_id'] as string, destination: t['destination'] as Destination, message_id: t['message_id'] as string };
  }
  return { user_id: t['user_id'] as string, message_id: t['message_id'] as string };
}

function normalizeReactionBody(b: Record<string, unknown>): MessageBody {
  // `remove: false` is the same request as no `remove`: stored without it, so both hash alike.
  return b['remove'] === true ? { emoji: b['emoji'] as string, remove: true } : { emoji: b['emoji'] as string };
}

function normalizeBody(b: Record<string, unknown>): MessageBody {
  const out: MessageBody = {};
  if (b['content'] !== undefined) out.content = b['content'] as string;
  if (b['card'] !== undefined) out.card = normalizeCard(b['card'] as Record<string, unknown>);
  if (b['links'] !== undefined) {
    out.links = (b['links'] as Record<string, unknown>[]).map((l) => ({ label: l['label'] as string, url: l['url'] as string }));
  }
  if (b['attachments'] !== undefined) out.attachments = normalizeAttachments(b['attachments'] as Record<string, unknown>[]);
  return out;
}

/** Attachments with only the keys the contract knows, in its order (the payload hash covers each file id, its bytes' SHA-256). */
function normalizeAttachments(list: Record<string, unknown>[]): NonNullable<MessageBody['attachments']> {
  return list.map((a) => ({
    file: a['file'] as string,
    filename: a['filename'] as string,
    ...(a['description'] !== undefined ? { description: a['description'] as string } : {}),
  }));
}

function normalizeCard(c: Record<string, unknown>): Card {
  const card: Card = {};
  if (c['title'] !== undefined) card.title = c['title'] as string;
  if (c['description'] !== undefined) card.description = c['description'] as string;
  if (c['url'] !== undefined) card.url = c['url'] as string;
  if (c['color'] !== undefined) card.color = c['color'] as number;
  if (c['footer'] !== undefined) card.footer = c['footer'] as string;
  if (c['fields'] !== undefined) {
    card.fields = (c['fields'] as Record<string, unknown>[]).map((f) => {
      const field: NonNullable<Card['fields']>[number] = { name: f['name'] as string, value: f['value'] as string };
      if (f['inline'] !== undefined) field.inline = f['inline'] as boolean;
      return field;
    });
  }
  return card;
}

/** Characters a card counts against Discord's 6000 total for an embed. */
export function cardLength(card: Card): number {
  let n = (card.title?.length ?? 0) + (card.description?.length ?? 0) + (card.footer?.length ?? 0);
  for (const f of card.fields ?? []) n += f.name.length + f.value.length;
  return n;
}

/** Canonical hash of what a request asks for; a reused request_id must match it. */
export function payloadHash(d: { kind: StoredKind; target: Target; body: MessageBody }): string {
  return createHash('sha256').update(JSON.stringify([d.kind, d.target, d.body])).digest('hex');
}

/**
 * Discord's create-message nonce (at most 25 characters), the same for every attempt of one
 * delivery, so Discord returns the message already created instead of creating another.
 */
export function deliveryNonce(requestId: string): string {
  return createHash('sha256').update(`herald:${requestId}`).digest('base64url').slice(0, 25);
}

/** Where a stored delivery is in its lifecycle; `unconfirmed` only for a chat send written without the platform's proof. */
export type DeliveryStatus = 'pending' | 'in_flight' | 'delivered' | 'failed' | 'unknown' | 'unconfirmed';

/** What the state of a stored delivery is read from. */
interface LeasedRow {
  readonly status: DeliveryStatus;
  readonly lease_expires_at: Date | null;
}

/** The row's state in the protocol's words (pending, unknown, delivered, failed), whatever its kind. */
export function wireStatus(row: LeasedRow, now: Date): 'pending' | 'unknown' | 'delivered' | 'failed' {
  if (row.status === 'in_flight') return isLeaseExpired(row, now) ? 'unknown' : 'pending';
  // Only chat sends are ever unconfirmed: to the others' words it is unknown.
  if (row.status === 'unconfirmed') return 'unknown';
  return row.status;
}

/** In flight under a lease that expired (its dispatcher died, or is about to lose it). */
export function isLeaseExpired(row: LeasedRow, now: Date): boolean {
  return row.lease_expires_at !== null && row.lease_expires_at.getTime() <= now.getTime();
}
