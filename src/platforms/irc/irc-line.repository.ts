import { sql, type Kysely } from 'kysely';
import type { ChannelLine } from './irc-connection.js';
import type { IrcDb } from './irc-line.table.js';
import { storableText } from '../../infra/contract/storable.js';
import type { IrcLineRow } from './irc-line.table.js';

type Db = Kysely<IrcDb>;

/** Store a line (its text made storable: an IRC server's line may hold what PostgreSQL refuses); one the store already has (same msgid) is ignored. */
export async function storeLine(db: Db, line: ChannelLine): Promise<void> {
  await db
    .insertInto('irc_lines')
    .values({ channel: storableText(line.channel), nick: storableText(line.nick), text: storableText(line.text), at: line.time, msgid: line.msgid === undefined ? null : storableText(line.msgid), delivery_tag: line.deliveryTag ?? null })
    .onConflict((oc) => oc.column('msgid').doNothing())
    .execute();
}

/** Newest first, at most `limit`, strictly after `since` when given. */
export async function readLines(db: Db, channel: string, since: Date | undefined, limit: number): Promise<IrcLineRow[]> {
  let q = db.selectFrom('irc_lines').selectAll().where('channel', '=', channel);
  if (since !== undefined) q = q.where('at', '>', since);
  return q.orderBy('at', 'desc').orderBy('id', 'desc').limit(limit).execute();
}

/** Oldest first, from `from` to `until`, at most `max`. */
export async function linesBetween(db: Db, channel: string, from: Date, until: Date, max: number): Promise<IrcLineRow[]> {
  return db.selectFrom('irc_lines').selectAll().where('channel', '=', channel).where('at', '>=', from).where('at', '<=', until).orderBy('at').orderBy('id').limit(max).execute();
}

/** The lines tagged with a send's key (`key` alone, or `key:i/n` for its parts). */
export async function linesTagged(db: Db, channel: string, key: string): Promise<IrcLineRow[]> {
  return db
    .selectFrom('irc_lines')
    .selectAll()
    .where('channel', '=', channel)
    // starts_with, not LIKE: a key may hold `_`, which LIKE reads as a wildcard.
    .where((eb) => eb.or([eb('delivery_tag', '=', key), sql<boolean>`starts_with(delivery_tag, ${`${key}:`})`]))
    .orderBy('id')
    .execute();
}

export async function addChannel(db: Db, channel: string, now: Date): Promise<void> {
  await db.insertInto('irc_channels').values({ channel, created_at: now }).onConflict((oc) => oc.column('channel').doNothing()).execute();
}

export async function listStoredChannels(db: Db): Promise<string[]> {
  return (await db.selectFrom('irc_channels').select('channel').orderBy('channel').execute()).map((r) => r.channel);
}

/** Bounded retention: lines older than `before`, and beyond the newest `perChannel` of a channel. */
export async function pruneLines(db: Db, before: Date, perChannel: number): Promise<number> {
  const old = await db.deleteFrom('irc_lines').where('at', '<', before).executeTakeFirst();
  const over = await sql`
    delete from irc_lines where id in (
      select id from (
        select id, row_number() over (partition by channel order by at desc, id desc) as n from irc_lines
      ) ranked where n > ${perChannel}
    )`.execute(db);
  return Number(old.numDeletedRows) + Number(over.numAffectedRows ?? 0n);
}
