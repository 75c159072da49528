import { defineModule } from '../contract.js';
import type { DestinationService } from './destination.service.js';

export type { DestinationService } from './destination.service.js';

/** What the destinations module gives the others. */
export interface Destinations {
  readonly destinations: DestinationService;
}

/** Named destinations per server, mapped to a channel (`/destinations`, `/admin/destinations`). */
export const destinationsModule = defineModule<Destinations>({
  name: 'destinations',
  commands: async () => [(await import('./destinations.command.js')).destinationsCommand],
  async start({ db, clock, transports }) {
    const [{ DestinationService }, { destinationOperations }] = await Promise.all([import('./destination.service.js'), import('./destination.http.js')]);
    const home = transports.home;
    if (home.channels === undefined) throw new Error(`the ${home.name} transport cannot look up channels, which destinations need`);
    const irc = transports.get('irc')?.channels;
    const destinations = new DestinationService(db, { name: home.name, channels: home.channels }, clock, irc !== undefined ? { channels: irc } : undefined);
    return { gives: { destinations }, operations: [destinationOperations(destinations)] };
  },
});
