import type { Kysely } from 'kysely';
import type { components } from '../../../generated/api.js';
import { TransportError, type Channels, type TransportName } from '../../platforms/platform.js';
import type { Clock } from '../../infra/clock.js';
import type { DestinationsDb } from './destination.table.js';
import { DESTINATIONS, type Destination } from '../deliveries/index.js';
import { ConflictError, InvalidRequestError, NotFoundError, UpstreamError } from '../../infra/errors.js';
import { deleteDestination, isMappedChannel, listDestinations, listenedChannels, listGuildDestinations, setDestinationListen, upsertDestination } from './destination.repository.js';

/**
 * A platform destinations may map to, as this module needs it. The wiring builds one for each
 * transport that can look channels up.
 */
export interface DestinationPlatform {
  /** The transport's name: what a `{transport, channel}` request names and the mapping stores. */
  readonly name: TransportName;
  /**
   * Looks a channel up; undefined when it does not exist or the bot cannot see it. The answer's
   * `id` is what the mapping stores, so a platform may normalise the name it was given (IRC:
   * `#Alerts` is `#alerts`).
   */
  readonly channels: Channels;
  /**
   * Why `channel` cannot name a channel on this platform, as a sentence about the field `channel`
   * (`channel must be an IRC channel name …`), or undefined. Checked before the lookup: a malformed
   * name is the caller's mistake (400), not a channel the platform does not show (422). Absent:
   * every name is looked up.
   */
  checkChannel?(channel: string): string | undefined;
}

/** The platforms destinations may map to. */
export interface DestinationPlatforms {
  /**
   * Herald's home platform, whose guilds the mappings belong to: a channel there must be in the
   * mapping's guild, and a mapping to it answers `channel_id`.
   */
  readonly home: DestinationPlatform;
  /** Any others this Herald runs (IRC, when it speaks IRC). */
  readonly others: readonly DestinationPlatform[];
}

/** A channel on a named platform, as a request names it. */
export interface PlatformChannel {
  transport: string;
  channel: string;
}

/**
 * The request and answer fields that named a platform's channels before `{transport, channel}`
 * existed, by platform: mappings to it keep answering in that field, and a request naming the
 * channel there keeps its reasons (the home platform's field is `channel_id`).
 */
export const NAMED_CHANNEL_FIELDS: Readonly<Record<string, { field: 'irc_channel'; missing: string; invalid: string }>> = {
  irc: { field: 'irc_channel', missing: 'irc_channel needs IRC (HERALD_IRC_URL is not set)', invalid: 'irc_channel must be an IRC channel name such as #alerts' },
};

/** `channel_id` for the home platform, `irc_channel` for IRC, `transport` with `channel` for any other. */
export type DestinationMapping = components['schemas']['DestinationMapping'];
type MappingChannel = Omit<DestinationMapping, 'guild_id' | 'destination'>;

/** One guild's destinations, every one of the protocol's, mapped or not. */
export type GuildDestinations = components['schemas']['GuildDestinations'];

/** Operators map each (guild, destination) to exactly one channel, on any platform Herald runs. */
export class DestinationService {
  private readonly byName: ReadonlyMap<string, DestinationPlatform>;

  constructor(
    private readonly db: Kysely<DestinationsDb>,
    private readonly platforms: DestinationPlatforms,
    private readonly clock: Clock,
    /** Told after a change of which channels listen was committed. */
    private readonly listenChanged?: () => void,
  ) {
    this.byName = new Map([platforms.home, ...platforms.others].map((p) => [p.name, p]));
  }

  /** The home platform's transport name. */
  get home(): string {
    return this.platforms.home.name;
  }

  /** Whether destinations may map to the platform of this transport name. */
  runs(transport: string): boolean {
    return this.byName.has(transport);
  }

  /** Whether some destination maps to this channel of this transport (where a handoff may go). */
  mapped(transport: string, channelId: string): Promise<boolean> {
    return isMappedChannel(this.db, transport, channelId);
  }

  async list(): Promise<DestinationMapping[]> {
    return (await listDestinations(this.db)).map((row) => ({ guild_id: row.guild_id, destination: row.destination, ...this.channelOf(row), ...listening(row) }));
  }

  /** Which of the protocol's destinations a guild has mapped: a post to any other fails. */
  async forGuild(guildId: string): Promise<GuildDestinations> {
    const mapped = new Map((await listGuildDestinations(this.db, guildId)).map((row) => [row.destination, row]));
    return {
      guild_id: guildId,
      destinations: DESTINATIONS.map(({ destination, description }) => {
        const row = mapped.get(destination);
        return row === undefined ? { destination, description, mapped: false } : { destination, description, mapped: true, ...this.channelOf(row) };
      }),
    };
  }

  /** Map to a channel of the home platform (the `/destinations set` command's, and `channel_id`'s). */
  async set(guildId: string, destination: string, channelId: string): Promise<DestinationMapping> {
    return this.map(guildId, destination, { transport: this.platforms.home.name, channel: channelId });
  }

  /**
   * Map after asking the channel's platform that the bot sees the channel (and, on the home
   * platform, that it is in that guild). The destination is checked here, not only by callers: a
   * slash command's choices are not enforced by every client. `invalidChannel` replaces the
   * platform's reason for a malformed name (a request that named the channel in another field).
   */
  async map(guildId: string, destination: string, to: PlatformChannel, invalidChannel?: string): Promise<DestinationMapping> {
    checkDestination(destination);
    const platform = this.byName.get(to.transport);
    if (platform === undefined) throw new InvalidRequestError(`transport must be one of ${[...this.byName.keys()].join(', ')} (the platforms this Herald runs)`);
    const problem = platform.checkChannel?.(to.channel);
    if (problem !== undefined) throw new InvalidRequestError(invalidChannel ?? problem);
    let channel;
    try {
      channel = await platform.channels.getChannel(to.channel);
    } catch (err) {
      if (err instanceof TransportError && err.failure.kind !== 'transient') channel = undefined;
      else throw new UpstreamError(`${platform.name} unavailable`);
    }
    if (channel === undefined) throw new ConflictError('channel not found or not visible to the bot');
    if (platform === this.platforms.home && channel.guildId !== guildId) throw new ConflictError('channel belongs to another guild');
    if (!channel.isText) throw new ConflictError('channel is not a text channel');
    const row = await upsertDestination(this.db, guildId, destination, { transport: platform.name, channelId: channel.id }, this.clock.now());
    return { guild_id: row.guild_id, destination: row.destination, ...this.channelOf(row), ...listening(row) };
  }

  /** Opt the destination's channel in to (or out of) the inbound inbox. */
  async listen(guildId: string, destination: string, listen: boolean): Promise<DestinationMapping> {
    checkDestination(destination);
    const row = await setDestinationListen(this.db, guildId, destination, listen, this.clock.now());
    if (row === undefined) throw new NotFoundError('mapping not found');
    this.listenChanged?.();
    return { guild_id: row.guild_id, destination: row.destination, ...this.channelOf(row), ...listening(row) };
  }

  /** The channels opted in to the inbound inbox (the inbox module's port). */
  async listened(): Promise<{ transport: string; channelId: string; since: Date }[]> {
    return (await listenedChannels(this.db)).map((r) => ({ transport: r.transport, channelId: r.channel_id, since: r.listen_since ?? new Date(0) }));
  }

  async remove(guildId: string, destination: string): Promise<void> {
    checkDestination(destination);
    if (!(await deleteDestination(this.db, guildId, destination))) throw new NotFoundError('mapping not found');
  }

  /** A mapping's channel in the form its platform answers in (see NAMED_CHANNEL_FIELDS). */
  private channelOf(row: { transport: string; channel_id: string }): MappingChannel {
    if (row.transport === this.platforms.home.name) return { channel_id: row.channel_id };
    const named = NAMED_CHANNEL_FIELDS[row.transport];
    return named !== undefined ? { [named.field]: row.channel_id } : { transport: row.transport, channel: row.channel_id };
  }
}

/** `listen: true` only on a mapping that listens: every other answer stays as it was. */
function listening(row: { listen?: boolean }): { listen?: true } {
  return row.listen === true ? { listen: true } : {};
}

export const UNKNOWN_DESTINATION = `destination must be one of ${DESTINATIONS.map((d) => d.destination).join(', ')}`;

function checkDestination(destination: string): asserts destination is Destination {
  if (!DESTINATIONS.some((d) => d.destination === destination)) throw new InvalidRequestError(UNKNOWN_DESTINATION);
}
