import type { OperationHandlers } from '../../infra/http/api.js';
import { InvalidRequestError } from '../../infra/errors.js';
import { reply } from '../../infra/http/reply.js';
import { NAMED_CHANNEL_FIELDS, type DestinationService, type PlatformChannel } from './destination.service.js';

/** The admin API's destination mappings. */
export function destinationOperations(destinations: DestinationService): OperationHandlers {
  return (kit) => ({
    listDestinationMappings: async () => reply('listDestinationMappings', 200, { items: await destinations.list() }),
    getGuildDestinations: async (c) => reply('getGuildDestinations', 200, await destinations.forGuild(String(c.request.params['guild_id']))),
    setDestinationMapping: async (c, body) => {
      kit.checkBody('setDestinationMapping', body);
      const { guild_id, destination } = c.request.params as { guild_id: string; destination: string };
      const to = requestedChannel(body as Record<string, string | undefined>, destinations);
      return reply('setDestinationMapping', 200, await destinations.map(guild_id, destination, to.channel, to.invalid));
    },
    setDestinationListen: async (c, body) => {
      kit.checkBody('setDestinationListen', body);
      const { guild_id, destination } = c.request.params as { guild_id: string; destination: string };
      return reply('setDestinationListen', 200, await destinations.listen(guild_id, destination, (body as { listen: boolean }).listen));
    },
    deleteDestinationMapping: async (c) => {
      const { guild_id, destination } = c.request.params as { guild_id: string; destination: string };
      await destinations.remove(guild_id, destination);
      return { status: 204 };
    },
  });
}

/**
 * The one channel a valid request body names: `channel_id` (the home platform), a field named for
 * a platform (`irc_channel`), or `transport` with `channel`. The contract has checked each field's
 * shape; which of them go together is checked here.
 */
function requestedChannel(body: Record<string, string | undefined>, destinations: DestinationService): { channel: PlatformChannel; invalid?: string } {
  const { channel_id, transport, channel } = body;
  if ((transport === undefined) !== (channel === undefined)) throw new InvalidRequestError('transport and channel go together: give both');
  const named = Object.entries(NAMED_CHANNEL_FIELDS).flatMap(([platform, f]) => {
    const value = body[f.field];
    return value !== undefined ? [{ platform, ...f, value }] : [];
  });
  const given = [...(channel_id !== undefined ? ['channel_id'] : []), ...named.map((n) => n.field)];
  if (given.length + (transport !== undefined ? 1 : 0) > 1) {
    const fields = ['channel_id', ...Object.values(NAMED_CHANNEL_FIELDS).map((f) => f.field)].join(', ');
    throw new InvalidRequestError(transport === undefined && given.length === 2 ? `give ${given.join(' or ')}, not both` : `give one of ${fields}, or transport with channel`);
  }
  if (transport !== undefined && channel !== undefined) return { channel: { transport, channel } };
  const [first] = named;
  if (first === undefined) return { channel: { transport: destinations.home, channel: channel_id ?? '' } };
  if (!destinations.runs(first.platform)) throw new InvalidRequestError(first.missing);
  return { channel: { transport: first.platform, channel: first.value }, invalid: first.invalid };
}
