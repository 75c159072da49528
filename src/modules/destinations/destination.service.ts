import type { Kysely } from 'kysely';
import { TransportError, type Channels, type TransportName } from '../../transports/transport.js';
import type { Clock } from '../../platform/clock.js';
import type { Database } from '../../schema.js';
import { DESTINATIONS, type Destination } from '../deliveries/index.js';
import { ConflictError, InvalidRequestError, NotFoundError, UpstreamError } from '../../platform/errors.js';
import { deleteDestination, listDestinations, listGuildDestinations, upsertDestination } from './destination.repository.js';

/** `channel_id` for a Discord channel, `irc_channel` for an IRC one (existing answers keep their shape). */
export type DestinationMapping = { guild_id: string; destination: Destination } & ({ channel_id: string } | { irc_channel: string });

/** One guild's destinations, every one of the protocol's, mapped or not. */
export interface GuildDestinations {
  guild_id: string;
  destinations: { destination: Destination; description: string; mapped: boolean; channel_id?: string; irc_channel?: string }[];
}

/** Operators map each (guild, destination) to exactly one channel. */
export class DestinationService {
  constructor(
    private readonly db: Kysely<Database>,
    /** Where mapped channels live, and how to look them up there. */
    private readonly platform: { name: TransportName; channels: Channels },
    private readonly clock: Clock,
    /** IRC, when Herald speaks it: destinations may map to its channels too. */
    private readonly irc?: { channels: Channels },
  ) {}

  async list(): Promise<DestinationMapping[]> {
    return (await listDestinations(this.db)).map(toMapping);
  }

  /** Which of the protocol's destinations a guild has mapped: a post to any other fails. */
  async forGuild(guildId: string): Promise<GuildDestinations> {
    const mapped = new Map((await listGuildDestinations(this.db, guildId)).map((row) => [row.destination, row]));
    return {
      guild_id: guildId,
      destinations: DESTINATIONS.map(({ destination, description }) => {
        const row = mapped.get(destination);
        if (row === undefined) return { destination, description, mapped: false };
        return row.transport === 'irc' ? { destination, description, mapped: true, irc_channel: row.channel_id } : { destination, description, mapped: true, channel_id: row.channel_id };
      }),
    };
  }

  /**
   * Map after asking Discord that the bot sees the channel, in that guild. The destination is
   * checked here, not only by callers: a slash command's choices are not enforced by every client.
   */
  async set(guildId: string, destination: string, channelId: string): Promise<DestinationMapping> {
    checkDestination(destination);
    let channel;
    try {
      channel = await this.platform.channels.getChannel(channelId);
    } catch (err) {
      if (err instanceof TransportError && err.failure.kind !== 'transient') channel = undefined;
      else throw new UpstreamError('discord unavailable');
    }
    if (channel === undefined) throw new ConflictError('channel not found or not visible to the bot');
    if (channel.guildId !== guildId) throw new ConflictError('channel belongs to another guild');
    if (!channel.isText) throw new ConflictError('channel is not a text channel');
    return toMapping(await upsertDestination(this.db, guildId, destination, { transport: this.platform.name, channelId }, this.clock.now()));
  }

  /** Map to an IRC channel: it only has to be a valid name (Herald's observer joins it on the first post). */
  async setIrc(guildId: string, destination: string, ircChannel: string): Promise<DestinationMapping> {
    checkDestination(destination);
    if (this.irc === undefined) throw new InvalidRequestError('irc_channel needs IRC (HERALD_IRC_URL is not set)');
    const channel = await this.irc.channels.getChannel(ircChannel);
    if (channel === undefined) throw new InvalidRequestError('irc_channel must be an IRC channel name such as #alerts');
    return toMapping(await upsertDestination(this.db, guildId, destination, { transport: 'irc', channelId: channel.id }, this.clock.now()));
  }

  async remove(guildId: string, destination: string): Promise<void> {
    checkDestination(destination);
    if (!(await deleteDestination(this.db, guildId, destination))) throw new NotFoundError('mapping not found');
  }
}

export const UNKNOWN_DESTINATION = `destination must be one of ${DESTINATIONS.map((d) => d.destination).join(', ')}`;

function checkDestination(destination: string): asserts destination is Destination {
  if (!DESTINATIONS.some((d) => d.destination === destination)) throw new InvalidRequestError(UNKNOWN_DESTINATION);
}

function toMapping(row: { guild_id: string; destination: Destination; channel_id: string; transport: string }): DestinationMapping {
  return row.transport === 'irc'
    ? { guild_id: row.guild_id, destination: row.destination, irc_channel: row.channel_id }
    : { guild_id: row.guild_id, destination: row.destination, channel_id: row.channel_id };
}
