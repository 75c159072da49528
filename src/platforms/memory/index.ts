import { definePlatform } from '../plugin.js';
import { MemoryPlatform } from './memory-platform.js';

/** The memory platform's server, its channels and its one person, for smoke tests to address. */
export const MEMORY_IDS = {
  guild: '200000000000000001',
  channels: { alerts: '200000000000000002', general: '200000000000000003' },
  user: '200000000000000004',
} as const;

/**
 * A platform held in this process's memory (HERALD_TRANSPORT=memory): Herald serves, dispatches and
 * answers exactly as on Discord, with nothing outside the process, for smoke tests. It starts with
 * one server (MEMORY_IDS) and loses everything it was sent when the process stops.
 */
export const memory = definePlatform<Record<string, never>>({
  name: 'memory',
  off: 'HERALD_TRANSPORT is not memory',
  config: (_env, core) => (core.home === 'memory' ? {} : undefined),
  async start(_config, services) {
    const transport = new MemoryPlatform({ now: () => services.clock.now() });
    transport.addUser(MEMORY_IDS.user, 'Ada');
    for (const [name, id] of Object.entries(MEMORY_IDS.channels)) transport.addChannel(id, { guildId: MEMORY_IDS.guild, name, members: [MEMORY_IDS.user] });
    return { facets: transport, readiness: () => ({}), close: async () => undefined };
  },
});
