import type { DmTarget, PostTarget } from './delivery.js';
import { facet, type SendKind } from './send-kind.js';

/** The reason a post to an unmapped destination fails with (counted by the engine's metrics). */
export const DESTINATION_UNMAPPED = 'destination not mapped';

/** A post: to the channel its guild's destination maps to now. */
export const postKind: SendKind<PostTarget> = {
  kind: 'post',
  async resolve(target, { ports, log }) {
    const address = await ports.resolveDestination(target.guild_id, target.destination);
    if (address === undefined) {
      log.warn({ guild_id: target.guild_id, destination: target.destination, reason: 'destination_unmapped' }, 'no channel mapped for this destination');
      return { refused: { code: 'UPSTREAM_UNAVAILABLE', reason: DESTINATION_UNMAPPED } };
    }
    return { address, scope: target.guild_id };
  },
};

/** A DM: to a registered user only, checked now (at send time), through their DM channel. */
export const dmKind: SendKind<DmTarget> = {
  kind: 'dm',
  async resolve(target, { ports, transports, signal, log }) {
    if (!(await ports.isRegistered(target.user_id))) {
      log.info({ reason: 'recipient_unregistered' }, 'dm recipient is not registered');
      return { refused: { code: 'RECIPIENT_UNREACHABLE', reason: 'recipient not registered' } };
    }
    // A user's DM channel is on the platform they registered on (the home platform by default).
    const name = (await ports.registeredOn(target.user_id)) ?? transports.home.name;
    const platform = transports.get(name);
    if (platform === undefined) return { refused: { code: 'RECIPIENT_UNREACHABLE', reason: `recipient registered on ${name}, which this Herald does not run` } };
    const channelId = await facet(platform.dms, 'direct messages').openDm(target.user_id, signal);
    return { address: { transport: platform.name, channelId }, scope: '@me' };
  },
};
