import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { TransportError, type Platform, type Platforms } from '../../platforms/platform.js';
import type { DeleteTarget, FailureCode, MessageBody, ReactionTarget } from './delivery.js';
import { findDelivery } from './delivery.repository.js';
import type { DeliveriesDb, DeliveryRow, DeliveryUpdate } from './delivery.table.js';
import type { DeliveryPorts } from './send-kind.js';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import { notRegisteredWith } from './delivery.kinds.js';

/**
 * The kinds that act on a message already there (issue 25): `delete` (Herald's own post or DM)
 * and `reaction` (Herald's reaction on Herald's own message, or on one in a destination's channel
 * or a registered user's DM). Both calls are idempotent on every platform that has them (Discord's
 * reaction PUT/DELETE and message DELETE answered "already gone" as success by the transport,
 * Slack's `already_reacted`, `no_reaction` and `message_not_found` likewise), so a retry after a
 * lost answer, or a re-drive after a crash, acts once: exactly once is the platform's own.
 */

export type MessageOpOutcome = Pick<DeliveryUpdate, 'status' | 'failure_code' | 'reason' | 'transport' | 'channel_id' | 'message_id' | 'url'>;

export interface MessageOpContext {
  readonly db: Kysely<DeliveriesDb>;
  /** The platforms as the delivery's identity speaks them. */
  readonly transports: Platforms;
  /** The delivery's identity (null: the default): it acts only on messages sent as the same identity. */
  readonly identity: string | null;
  readonly ports: DeliveryPorts;
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** Called with the channel just before the platform call leaves (a lost answer puts it in doubt). */
  acting(transport: Platform, channelId: string): void;
}

/** The message a delete or a reaction acts on: where it is, and the link people open it by. */
interface Located {
  transport: Platform;
  channelId: string;
  messageId: string;
  url: string;
}

type Refusal = { refused: { code: FailureCode; reason: string } };

/** The reason an act on a message that is not Herald's delivered post or DM fails with. */
export const NOT_HERALDS_MESSAGE = 'message_ref is not a post or DM Herald delivered';

/**
 * Whether a row is a message an edit, a delete or a `message_ref` reaction may act on: Herald's
 * own post or DM, delivered. An allow-list, so a kind added later (and every kind but these two
 * now: a reaction, a delete, an edit, a handoff, a command's reply, a chat send) is never a target.
 */
export function isOwnMessage(row: DeliveryRow): row is DeliveryRow & { channel_id: string; message_id: string } {
  return (row.kind === 'post' || row.kind === 'dm') && row.status === 'delivered' && row.channel_id !== null && row.message_id !== null;
}

/**
 * Herald's own delivered post or DM, by the request_id that sent it. `adds`: the act puts something
 * into the conversation (a reaction), so a DM's recipient must still be registered with the bot, as
 * for an edit; a delete only takes Herald's own message away, which stays allowed after they leave.
 */
async function ownMessage(ctx: MessageOpContext, messageRef: string, adds: boolean): Promise<Located | Refusal> {
  const original = await findDelivery(ctx.db, messageRef);
  // Another identity's message is not found: an agent acts only on what it sent as itself.
  if (original === undefined || !isOwnMessage(original) || original.identity !== ctx.identity) return { refused: { code: 'NOT_FOUND', reason: NOT_HERALDS_MESSAGE } };
  if (adds && original.kind === 'dm') {
    const identity = ctx.identity ?? DEFAULT_IDENTITY;
    if (!(await ctx.ports.isRegistered((original.target as { user_id: string }).user_id, identity))) return { refused: { code: 'RECIPIENT_UNREACHABLE', reason: notRegisteredWith(identity) } };
  }
  const transport = ctx.transports.get(original.transport ?? ctx.transports.home.name);
  if (transport === undefined) return { refused: { code: 'UPSTREAM_UNAVAILABLE', reason: `the message is on ${original.transport ?? 'its platform'}, which this Herald does not run` } };
  return { transport, channelId: original.channel_id, messageId: original.message_id, url: original.url ?? '' };
}

/** A reaction's message, in whichever of its three forms the target gives. */
async function reactionMessage(ctx: MessageOpContext, target: ReactionTarget): Promise<Located | Refusal> {
  if ('message_ref' in target) return ownMessage(ctx, target.message_ref, true);
  if ('guild_id' in target) {
    const address = await ctx.ports.resolveDestination(target.guild_id, target.destination);
    if (address === undefined) return { refused: { code: 'UPSTREAM_UNAVAILABLE', reason: 'destination not mapped' } };
    const transport = ctx.transports.get(address.transport);
    if (transport === undefined) return { refused: { code: 'UPSTREAM_UNAVAILABLE', reason: `transport ${address.transport} is not configured` } };
    const url = transport.messageUrl(target.guild_id, address.channelId, target.message_id);
    return { transport, channelId: address.channelId, messageId: target.message_id, url };
  }
  const identity = ctx.identity ?? DEFAULT_IDENTITY;
  if (!(await ctx.ports.isRegistered(target.user_id, identity))) return { refused: { code: 'RECIPIENT_UNREACHABLE', reason: notRegisteredWith(identity) } };
  const name = (await ctx.ports.registeredOn(target.user_id, identity)) ?? ctx.transports.home.name;
  const transport = ctx.transports.get(name);
  if (transport?.dms === undefined) return { refused: { code: 'RECIPIENT_UNREACHABLE', reason: `recipient registered on ${name}, where this Herald has no DMs` } };
  const channelId = await transport.dms.openDm(target.user_id, ctx.signal);
  const url = transport.messageUrl('@me', channelId, target.message_id);
  return { transport, channelId, messageId: target.message_id, url };
}

/**
 * Run the platform call: a platform that says the message is not there fails NOT_FOUND (the
 * message is gone, or not in that channel); a call whose answer was lost may have acted, so it is
 * in doubt (retried, and never reported failed while in doubt: the call is idempotent).
 */
async function act(ctx: MessageOpContext, at: Located, call: () => Promise<void>): Promise<MessageOpOutcome> {
  ctx.acting(at.transport, at.channelId);
  try {
    await call();
  } catch (err) {
    if (err instanceof TransportError && err.failure.kind === 'not_found') {
      return { status: 'failed', failure_code: 'NOT_FOUND', reason: `the message is gone or not in that channel (${err.failure.detail})`, transport: at.transport.name };
    }
    if (err instanceof TransportError && err.failure.kind === 'transient') throw new TransportError({ ...err.failure, mayHaveCreated: true });
    throw err;
  }
  return { status: 'delivered', transport: at.transport.name, channel_id: at.channelId, message_id: at.messageId, url: at.url };
}

/** Delete Herald's own post or DM; a message already gone (a lost answer's retry) is delivered. */
export async function deliverDelete(ctx: MessageOpContext, target: DeleteTarget): Promise<MessageOpOutcome> {
  const at = await ownMessage(ctx, target.message_ref, false);
  if ('refused' in at) return { status: 'failed', failure_code: at.refused.code, reason: at.refused.reason };
  const deleter = at.transport.deleter;
  if (deleter === undefined) return { status: 'failed', failure_code: 'CAPABILITY_UNAVAILABLE', reason: `${at.transport.name} cannot delete messages` };
  return act(ctx, at, () => deleter.delete(at.channelId, at.messageId, ctx.signal));
}

/** Add (or with `remove`, take off) Herald's reaction. */
export async function deliverReaction(ctx: MessageOpContext, target: ReactionTarget, body: MessageBody): Promise<MessageOpOutcome> {
  const at = await reactionMessage(ctx, target);
  if ('refused' in at) return { status: 'failed', failure_code: at.refused.code, reason: at.refused.reason };
  const reactions = at.transport.reactions;
  if (reactions === undefined) return { status: 'failed', failure_code: 'CAPABILITY_UNAVAILABLE', reason: `${at.transport.name} has no reactions` };
  const emoji = body.emoji ?? '';
  return act(ctx, at, () => (body.remove === true ? reactions.remove(at.channelId, at.messageId, emoji, ctx.signal) : reactions.add(at.channelId, at.messageId, emoji, ctx.signal)));
}
