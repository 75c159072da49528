import { facet, type HandoffTarget, type SendKind } from '../deliveries/index.js';
import { mayHandOffIn, UNMAPPED_CHANNEL, type HandoffPlaces } from './handoff.place.js';

/**
 * A bot-to-bot handoff message (built and validated by this module, stored in the deliveries
 * outbox): sent once like a post, to the channel it names, mentioning its target bot and no one
 * else. Where it may go is checked again at send time (a mapping removed since it was accepted).
 */
export function handoffSendKind(places: HandoffPlaces): SendKind<HandoffTarget> {
  return {
    kind: 'handoff',
    async resolve(target, { transports, log }) {
      const home = transports.home;
      // The url names the channel's guild; a channel Herald cannot see is refused for good.
      const channel = await facet(home.channels, 'channel lookups').getChannel(target.channel_id);
      if (channel === undefined) return { refused: { code: 'NOT_FOUND', reason: 'channel not found or not visible to the bot' } };
      if (!(await mayHandOffIn(places, target.channel_id, channel))) {
        log.warn({ channel_id: target.channel_id, reason: 'handoff_channel_unmapped' }, 'handoff channel is not a mapped destination or a thread under one');
        return { refused: { code: 'UPSTREAM_UNAVAILABLE', reason: UNMAPPED_CHANNEL } };
      }
      return { address: { transport: home.name, channelId: target.channel_id }, scope: channel.guildId ?? '@me', mentions: { users: [target.target_bot_id] } };
    },
  };
}
