import { sql, type Kysely } from 'kysely';
import { LeasedTable } from '../../outbox/leased-table.js';
import type { ArchiveDb } from './archive.table.js';
import type { MediaScrapeRow } from './archive.table.js';

type Db = Kysely<ArchiveDb>;

/**
 * The scrapes queue: a running scrape whose next step is due and whose lease is free or expired
 * (its worker died) is claimed for one step; a release makes it due now. Steps finish under the
 * lease with `recordStep` / `recordStepFailure` / `pauseUnderLease`.
 */
export function scrapesTable(db: Db): LeasedTable<MediaScrapeRow> {
  return new LeasedTable<MediaScrapeRow>(db as unknown as Kysely<unknown>, {
    table: 'media_scrapes',
    key: 'id',
    orderBy: 'next_step_at',
    due: (now) => sql`state = 'running' and next_step_at <= ${now} and (lease_expires_at is null or lease_expires_at <= ${now})`,
    onRelease: (now) => ({ next_step_at: sql`${now}` }),
  });
}

/** Lease due scrapes for one step each (the queue's claim). */
export function claimScrapes(db: Db, owner: string, now: Date, leaseMs: number, limit: number): Promise<MediaScrapeRow[]> {
  return scrapesTable(db).claim(owner, now, leaseMs, limit);
}
