import type { ChannelInfo, Channels } from '../../platforms/platform.js';
import { TransportError } from '../../platforms/platform.js';
import { UpstreamError } from '../../infra/errors.js';

/** Why a handoff's channel is refused, naming the field (the same words at accept and at send). */
export const UNMAPPED_CHANNEL = "channel_id must be a mapped destination's channel or a thread under one (map it with /destinations set or PUT /admin/destinations/{guild_id}/{destination})";

/** What deciding where a handoff may go needs: the mappings, and the home platform's channel lookups. */
export interface HandoffPlaces {
  /** The home platform's name (mappings name it). */
  readonly transport: string;
  /** Whether some destination maps to this channel of `transport`. */
  mapped(transport: string, channelId: string): Promise<boolean>;
  readonly channels: Channels | undefined;
}

/**
 * Whether a handoff may go to `channelId`, given what the platform says of it (`channel`): only a
 * channel some destination maps to on the home platform, or a thread whose parent is one. A DM, an
 * unmapped channel or a thread under one is never a place for a handoff: the operator chooses where
 * bots talk, as they choose where posts go.
 */
export async function mayHandOffIn(places: HandoffPlaces, channelId: string, channel: ChannelInfo | undefined): Promise<boolean> {
  if (await places.mapped(places.transport, channelId)) return true;
  return channel?.parentId !== undefined && (await places.mapped(places.transport, channel.parentId));
}

/**
 * At accept time: whether a handoff may go to `channelId`. A mapped channel needs no platform
 * call; anything else is looked up (is it a thread under a mapped channel?). The platform not
 * answering is an UpstreamError (502), never a guess.
 */
export async function mayHandOffTo(places: HandoffPlaces, channelId: string): Promise<boolean> {
  if (await places.mapped(places.transport, channelId)) return true;
  if (places.channels === undefined) return false;
  let channel: ChannelInfo | undefined;
  try {
    channel = await places.channels.getChannel(channelId);
  } catch (err) {
    if (err instanceof TransportError && err.failure.kind !== 'transient') return false;
    throw new UpstreamError(`${places.transport} unavailable`);
  }
  return channel?.parentId !== undefined && (await places.mapped(places.transport, channel.parentId));
}
