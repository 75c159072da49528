import type { IrcLine } from 'irc-framework';

/** A PRIVMSG in a channel, as the connection read it (live, echoed, or replayed on JOIN). */
export interface ChannelLine {
  channel: string;
  nick: string;
  text: string;
  /** server-time when the server sent one, else when it arrived. */
  time: Date;
  msgid: string | undefined;
  /** The client tag `+herald/delivery`, when a Herald sender wrote it. */
  deliveryTag: string | undefined;
}

/** The client tag carrying the delivery a line belongs to (tag keys are lowercased by parsers). */
export const DELIVERY_TAG = '+herald/delivery';

/** A PRIVMSG line as a ChannelLine, or undefined when it was not said in a channel. */
export function channelLineOf(line: IrcLine): ChannelLine | undefined {
  const [target, text] = line.params;
  if (target === undefined || text === undefined || !/^[#&]/.test(target)) return undefined;
  const time = typeof line.tags['time'] === 'string' ? new Date(line.tags['time']) : new Date();
  const tag = line.tags[DELIVERY_TAG];
  return {
    channel: target.toLowerCase(),
    nick: line.nick,
    text,
    time: Number.isNaN(time.getTime()) ? new Date() : time,
    msgid: typeof line.tags['msgid'] === 'string' ? line.tags['msgid'] : undefined,
    deliveryTag: typeof tag === 'string' ? tag : undefined,
  };
}
