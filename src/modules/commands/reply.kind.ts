import type { ReplyTarget, SendKind } from '../deliveries/index.js';

/** A command's reply: to the channel the command was invoked in, on the home platform. */
export const replySendKind: SendKind<ReplyTarget> = {
  kind: 'reply',
  resolve: async (target, { transports }) => ({ address: { transport: transports.home.name, channelId: target.channel_id }, scope: target.guild_id }),
};
