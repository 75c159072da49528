import type { Kysely } from 'kysely';
import { DomainError } from '../../infra/errors.js';
import type { ArchiveDb, MediaScrapeRow, ScrapeMode } from './archive.table.js';

type Db = Kysely<ArchiveDb>;

/** A start's request_id that an earlier start used for another channel or mode. */
export class ScrapeRequestReusedError extends DomainError {
  constructor() {
    super('request_id was already used for a different scrape');
  }
}

/**
 * The scrape an earlier start with `requestId` started or resumed, as it is now (undefined: none,
 * or it was deleted). The same id for another channel or mode is refused.
 */
export async function scrapeOfRequest(db: Db, requestId: string, asked: { channelId: string; mode: ScrapeMode }): Promise<MediaScrapeRow | undefined> {
  const row = await db
    .selectFrom('media_scrape_requests')
    .innerJoin('media_scrapes', 'media_scrapes.id', 'media_scrape_requests.scrape_id')
    .selectAll('media_scrapes')
    .where('media_scrape_requests.request_id', '=', requestId)
    .executeTakeFirst();
  if (row !== undefined && (row.channel_id !== asked.channelId || row.mode !== asked.mode)) throw new ScrapeRequestReusedError();
  return row;
}

/**
 * `write` (a start or a resume) and, when it wrote a scrape and a request_id was given, the id
 * kept beside it, in one transaction: a start that holds the key holds the scrape, and a second
 * start with the same key racing it waits, fails on the key or the one-running index, and reads
 * the first one's scrape (`media_scrape_requests_pkey`, `media_scrapes_one_running`).
 */
export async function keyedWrite(db: Db, requestId: string | undefined, now: Date, write: (db: Db) => Promise<MediaScrapeRow | undefined>): Promise<MediaScrapeRow | undefined> {
  if (requestId === undefined) return write(db);
  return db.transaction().execute(async (trx) => {
    const row = await write(trx);
    if (row !== undefined) await trx.insertInto('media_scrape_requests').values({ request_id: requestId, scrape_id: row.id, at: now }).execute();
    return row;
  });
}
