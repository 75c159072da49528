import { defineModule } from '../contract.js';
import { destinationOperations } from './destination.http.js';
import { DestinationService } from './destination.service.js';
import { destinationsCommand } from './destinations.command.js';

export type { DestinationService } from './destination.service.js';

/** What the destinations module gives the others. */
export interface Destinations {
  readonly destinations: DestinationService;
}

/** Named destinations per server, mapped to a channel (`/destinations`, `/admin/destinations`). */
export const destinationsModule = defineModule<Destinations>({
  name: 'destinations',
  commands: [destinationsCommand],
  async start({ db, clock, transports }) {
    const home = transports.home;
    if (home.channels === undefined) throw new Error(`the ${home.name} transport cannot look up channels, which destinations need`);
    const irc = transports.get('irc')?.channels;
    const destinations = new DestinationService(db, { name: home.name, channels: home.channels }, clock, irc !== undefined ? { channels: irc } : undefined);
    return { gives: { destinations }, operations: [destinationOperations(destinations)] };
  },
});
export { listDestinations } from './destination.repository.js';
