import type { OperationHandlers } from '../../platform/http/api.js';
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
      return reply('setDestinationMapping', 200, await destinations.set(guild_id, destination, (body as { channel_id: string }).channel_id));
    },
    deleteDestinationMapping: async (c) => {
      const { guild_id, destination } = c.request.params as { guild_id: string; destination: string };
      await destinations.remove(guild_id, destination);
      return { status: 204 };
    },
  });
}
