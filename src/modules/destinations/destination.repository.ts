import { sql, type Kysely } from 'kysely';
import type { DestinationsDb } from './destination.table.js';
import type { Address } from '../../platforms/platform.js';
import type { components } from '../../../generated/api.js';
import type { DestinationRow } from './destination.table.js';

/** A named destination, as the contract lists them. */
type Destination = components['schemas']['Destination'];

type Db = Kysely<DestinationsDb>;

/** Where posts to (guild, destination) go: a channel on a named transport. */
export async function findDestinationAddress(db: Db, guildId: string, destination: Destination): Promise<Address | undefined> {
  const row = await db
    .selectFrom('destinations')
    .select(['channel_id', 'transport'])
    .where('guild_id', '=', guildId)
    .where('destination', '=', destination)
    .executeTakeFirst();
  return row === undefined ? undefined : { transport: row.transport, channelId: row.channel_id };
}

/** Whether some (guild, destination) maps to this channel of this transport. */
export async function isMappedChannel(db: Db, transport: string, channelId: string): Promise<boolean> {
  const row = await db.selectFrom('destinations').select('destination').where('transport', '=', transport).where('channel_id', '=', channelId).limit(1).executeTakeFirst();
  return row !== undefined;
}

export async function upsertDestination(db: Db, guildId: string, destination: Destination, to: Address, now: Date): Promise<DestinationRow> {
  return db
    .insertInto('destinations')
    .values({ guild_id: guildId, destination, channel_id: to.channelId, transport: to.transport, updated_at: now })
    .onConflict((oc) => oc.columns(['guild_id', 'destination']).doUpdateSet({ channel_id: to.channelId, transport: to.transport, updated_at: now }))
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listDestinations(db: Db): Promise<DestinationRow[]> {
  return db.selectFrom('destinations').selectAll().orderBy('guild_id').orderBy('destination').execute();
}

export async function listGuildDestinations(db: Db, guildId: string): Promise<Pick<DestinationRow, 'destination' | 'channel_id' | 'transport'>[]> {
  return db.selectFrom('destinations').select(['destination', 'channel_id', 'transport']).where('guild_id', '=', guildId).execute();
}

export async function deleteDestination(db: Db, guildId: string, destination: Destination): Promise<boolean> {
  const result = await db
    .deleteFrom('destinations')
    .where('guild_id', '=', guildId)
    .where('destination', '=', destination)
    .executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** Opt a mapping's channel in to (or out of) the inbound inbox; undefined when there is no such mapping. */
export async function setDestinationListen(db: Db, guildId: string, destination: Destination, listen: boolean, now: Date): Promise<DestinationRow | undefined> {
  return db
    .updateTable('destinations')
    .set((eb) => ({ listen, listen_since: listen ? eb.fn.coalesce('listen_since', sql<Date>`${now}::timestamptz`) : null }))
    .where('guild_id', '=', guildId)
    .where('destination', '=', destination)
    .returningAll()
    .executeTakeFirst();
}

/** The channels opted in to the inbound inbox, with their platform and since when. */
export async function listenedChannels(db: Db): Promise<{ transport: string; channel_id: string; listen_since: Date | null }[]> {
  return db.selectFrom('destinations').select(['transport', 'channel_id', 'listen_since']).where('listen', '=', true).execute();
}
