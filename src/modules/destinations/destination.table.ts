import type { Generated, Selectable } from 'kysely';
import type { TransportName } from '../../platforms/platform.js';
import type { components } from '../../../generated/api.js';

/** A named destination, as the contract lists them. */
type Destination = components['schemas']['Destination'];

export interface DestinationTable {
  guild_id: string;
  destination: Destination;
  channel_id: string;
  /** The platform the channel is on. */
  transport: Generated<TransportName>;
  updated_at: Date;
  /** The operator opted the channel in to the inbound inbox: every message there is heard. */
  listen: Generated<boolean>;
  /** Since when it listens (a catch-up never reads back before it). */
  listen_since: Date | null;
}

export type DestinationRow = Selectable<DestinationTable>;

/** This part's tables, as it sees the store (the whole schema is src/schema.ts, at the wiring). */
export interface DestinationsDb {
  destinations: DestinationTable;
}
