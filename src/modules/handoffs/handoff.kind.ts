import { facet, type HandoffTarget, type SendKind } from '../deliveries/index.js';

/**
 * A bot-to-bot handoff message (built and validated by this module, stored in the deliveries
 * outbox): sent once like a post, to the channel it names, mentioning its target bot and no one else.
 */
export const handoffSendKind: SendKind<HandoffTarget> = {
  kind: 'handoff',
  async resolve(target, { transports }) {
    const home = transports.home;
    // The url names the channel's guild; a channel Herald cannot see is refused for good.
    const channel = await facet(home.channels, 'channel lookups').getChannel(target.channel_id);
    if (channel === undefined) return { refused: { code: 'NOT_FOUND', reason: 'channel not found or not visible to the bot' } };
    return { address: { transport: home.name, channelId: target.channel_id }, scope: channel.guildId ?? '@me', mentions: { users: [target.target_bot_id] } };
  },
};
