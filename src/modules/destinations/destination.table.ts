import type { Selectable } from 'kysely';
import type { Destination } from '../deliveries/delivery.js';

export interface DestinationTable {
  guild_id: string;
  destination: Destination;
  channel_id: string;
  updated_at: Date;
}

export type DestinationRow = Selectable<DestinationTable>;
