import type { Kysely } from 'kysely';
import type { Database } from '../../schema.js';
import type { Destination } from '../deliveries/delivery.js';
import type { DestinationRow } from './destination.table.js';

type Db = Kysely<Database>;

export async function findDestinationChannel(db: Db, guildId: string, destination: Destination): Promise<string | undefined> {
  const row = await db
    .selectFrom('destinations')
    .select('channel_id')
    .where('guild_id', '=', guildId)
    .where('destination', '=', destination)
    .executeTakeFirst();
  return row?.channel_id;
}

export async function upsertDestination(db: Db, guildId: string, destination: Destination, channelId: string, now: Date): Promise<DestinationRow> {
  return db
    .insertInto('destinations')
    .values({ guild_id: guildId, destination, channel_id: channelId, updated_at: now })
    .onConflict((oc) => oc.columns(['guild_id', 'destination']).doUpdateSet({ channel_id: channelId, updated_at: now }))
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listDestinations(db: Db): Promise<DestinationRow[]> {
  return db.selectFrom('destinations').selectAll().orderBy('guild_id').orderBy('destination').execute();
}

export async function deleteDestination(db: Db, guildId: string, destination: Destination): Promise<boolean> {
  const result = await db
    .deleteFrom('destinations')
    .where('guild_id', '=', guildId)
    .where('destination', '=', destination)
    .executeTakeFirst();
  return result.numDeletedRows > 0n;
}
