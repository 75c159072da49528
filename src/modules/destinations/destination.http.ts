import type { OperationHandlers } from '../../platform/http/api.js';
import { InvalidRequestError } from '../../platform/errors.js';
import { reply } from '../../platform/http/reply.js';
import type { DestinationService } from './destination.service.js';

/** The admin API's destination mappings. */
export function destinationOperations(destinations: DestinationService): OperationHandlers {
  return (kit) => ({
    listDestinationMappings: async () => reply('listDestinationMappings', 200, { items: await destinations.list() }),
    getGuildDestinations: async (c) => reply('getGuildDestinations', 200, await destinations.forGuild(String(c.request.params['guild_id']))),
    setDestinationMapping: async (c, body) => {
      kit.checkBody('setDestinationMapping', body);
      const { guild_id, destination } = c.request.params as { guild_id: string; destination: string };
      const b = body as { channel_id?: string; irc_channel?: string };
      if (b.channel_id !== undefined && b.irc_channel !== undefined) throw new InvalidRequestError('give channel_id or irc_channel, not both');
      const mapping = b.irc_channel !== undefined ? await destinations.setIrc(guild_id, destination, b.irc_channel) : await destinations.set(guild_id, destination, b.channel_id ?? '');
      return reply('setDestinationMapping', 200, mapping);
    },
    deleteDestinationMapping: async (c) => {
      const { guild_id, destination } = c.request.params as { guild_id: string; destination: string };
      await destinations.remove(guild_id, destination);
      return { status: 204 };
    },
  });
}
