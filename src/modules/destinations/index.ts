import { TransportError, type Channels, type TransportName } from '../../platforms/platform.js';
import { defineModule, ownTables } from '../contract.js';
import { deliveriesModule } from '../deliveries/index.js';
import type { DestinationService } from './destination.service.js';
import { tablesOf } from '../../infra/db/tables.js';
import type { DestinationsDb } from './destination.table.js';

export type { DestinationService } from './destination.service.js';

/** The event (src/infra/db/events.ts) saying which channels listen changed. */
export const LISTEN_CHANGED = 'destinations.listen';

/** What the destinations module gives the others. */
export interface Destinations {
  readonly destinations: DestinationService;
}

/** Named destinations per server, mapped to a channel (`/destinations`, `/admin/destinations`). */
export const destinationsModule = defineModule<Destinations, undefined, undefined, DestinationsDb>({
  name: 'destinations',
  needs: { modules: [deliveriesModule] },
  answers: ['resolveDestination'],
  tables: ownTables<DestinationsDb>(),
  commands: async () => [(await import('./destinations.command.js')).destinationsCommand],
  async start({ db: tables, clock, transports, use, events }) {
    const db = tablesOf<DestinationsDb>(tables);
    const [{ DestinationService }, { destinationOperations }, { findDestinationAddress }] = await Promise.all([
      import('./destination.service.js'),
      import('./destination.http.js'),
      import('./destination.repository.js'),
    ]);
    // A post goes where its destination maps at send time.
    use(deliveriesModule).answer({ resolveDestination: (guildId, destination) => findDestinationAddress(db, guildId, destination) });
    const home = transports.home;
    if (home.channels === undefined) throw new Error(`the ${home.name} transport cannot look up channels, which destinations need`);
    // Every platform that can look channels up can hold a destination; each checks its own names.
    // A channel any of the platform's bots sees may be mapped (another identity's Slack workspace,
    // HERALD_SLACK_IDENTITIES): a post there is sent by the agent's own bot, which must see it too.
    const platform = (name: TransportName, channels: Channels) => {
      const theirs = transports.identities.flatMap((identity) => transports.as(identity)?.get(name)?.channels ?? []);
      return { name, channels: seenByAny(channels, theirs), ...(channels.check !== undefined ? { checkChannel: channels.check } : {}) };
    };
    const others = transports.all.filter((t) => t !== home && t.channels !== undefined).map((t) => platform(t.name, t.channels as Channels));
    const destinations = new DestinationService(db, { home: platform(home.name, home.channels), others }, clock, () => events.publish(LISTEN_CHANGED));
    return { gives: { destinations }, operations: [destinationOperations(destinations)] };
  },
});

/** The default bot's view of a channel, then each other bot's in turn: one that cannot see it (or refuses) hands on to the next; one that cannot be reached now says so. */
function seenByAny(first: Channels, others: readonly Channels[]): Channels {
  if (others.length === 0) return first;
  return {
    ...first,
    async getChannel(channelId) {
      for (const lookup of [first, ...others]) {
        try {
          const found = await lookup.getChannel(channelId);
          if (found !== undefined) return found;
        } catch (err) {
          if (!(err instanceof TransportError) || err.failure.kind === 'transient') throw err;
        }
      }
      return undefined;
    },
  };
}
