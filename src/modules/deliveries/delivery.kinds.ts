import type { Address, Platforms } from '../../platforms/platform.js';
import type { DmTarget, PostTarget } from './delivery.js';
import { facet, type SendKind, type SendResolution } from './send-kind.js';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';

/** The reason a post to an unmapped destination fails with (counted by the engine's metrics). */
export const DESTINATION_UNMAPPED = 'destination not mapped';

/** A post: to the channel its guild's destination maps to now. */
export const postKind: SendKind<PostTarget> = {
  kind: 'post',
  async resolve(target, { ports, transports, signal, log }) {
    const address = await ports.resolveDestination(target.guild_id, target.destination);
    if (address === undefined) {
      log.warn({ guild_id: target.guild_id, destination: target.destination, reason: 'destination_unmapped' }, 'no channel mapped for this destination');
      return { refused: { code: 'UPSTREAM_UNAVAILABLE', reason: DESTINATION_UNMAPPED } };
    }
    return threaded(address, target.guild_id, target, transports, signal);
  },
};

/**
 * A send with its `reply_to` and `thread_id` applied, checked now on the platform the address is
 * on: a platform without them refuses (CAPABILITY_UNAVAILABLE); a thread that is not under the
 * address's channel refuses (UPSTREAM_UNAVAILABLE). Without either, the address as it is.
 */
async function threaded(address: Address, scope: string, target: { reply_to?: string; thread_id?: string }, transports: Platforms, signal: AbortSignal): Promise<SendResolution> {
  if (target.reply_to === undefined && target.thread_id === undefined) return { address, scope };
  const threading = transports.get(address.transport)?.threading;
  let replyTo = target.reply_to;
  if (target.thread_id !== undefined) {
    if (threading?.threads !== true || threading.inThread === undefined) return { refused: { code: 'CAPABILITY_UNAVAILABLE', reason: `${address.transport} has no threads` } };
    const thread = await threading.inThread(address.channelId, target.thread_id, signal);
    if ('refused' in thread) return { refused: { code: 'UPSTREAM_UNAVAILABLE', reason: thread.refused } };
    address = { transport: address.transport, channelId: thread.channelId };
    replyTo = thread.replyTo ?? replyTo;
  }
  if (target.reply_to !== undefined && threading?.replies !== true) return { refused: { code: 'CAPABILITY_UNAVAILABLE', reason: `${address.transport} has no replies` } };
  return { address, scope, ...(replyTo !== undefined ? { replyTo } : {}) };
}

/** The refusal's reason for a DM to a person not registered with the bot it is sent as. */
export function notRegisteredWith(identity: string): string {
  return identity === DEFAULT_IDENTITY ? 'recipient not registered' : `recipient not registered with the bot ${identity}`;
}

/** A DM: to a registered user only, checked now (at send time), through their DM channel. */
export const dmKind: SendKind<DmTarget> = {
  kind: 'dm',
  async resolve(target, { ports, transports, signal, log, identity }) {
    // Registered with the bot it is sent as: a person registered with another bot only is not reachable by this one.
    if (!(await ports.isRegistered(target.user_id, identity))) {
      log.info({ reason: 'recipient_unregistered' }, 'dm recipient is not registered');
      return { refused: { code: 'RECIPIENT_UNREACHABLE', reason: notRegisteredWith(identity) } };
    }
    // A user's DM channel is on the platform they registered on (the home platform by default).
    const name = (await ports.registeredOn(target.user_id, identity)) ?? transports.home.name;
    const platform = transports.get(name);
    if (platform === undefined) return { refused: { code: 'RECIPIENT_UNREACHABLE', reason: `recipient registered on ${name}, which this Herald does not run` } };
    const channelId = await facet(platform.dms, 'direct messages').openDm(target.user_id, signal);
    return threaded({ transport: platform.name, channelId }, '@me', target, transports, signal);
  },
};
