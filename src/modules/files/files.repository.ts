import { sql, type Kysely } from 'kysely';
import type { FileRow, FilesDb } from './files.table.js';

type Db = Kysely<FilesDb>;

/**
 * Record stored bytes, or mark the file already stored as used now. Runs in the transaction that
 * moves the bytes into place, under the row's lock, so a prune deleting the same file either
 * finished first (the file is written again) or waits (and then finds it used).
 */
export async function upsertFile(db: Db, file: { sha256: string; size: number; contentType: string; filename: string; now: Date }): Promise<{ row: FileRow; existing: boolean }> {
  const inserted = await db
    .insertInto('files')
    .values({ sha256: file.sha256, size_bytes: file.size, content_type: file.contentType, filename: file.filename, created_at: file.now, used_at: file.now })
    .onConflict((oc) => oc.column('sha256').doUpdateSet({ used_at: file.now }))
    .returningAll()
    .returning(sql<boolean>`(xmax = 0)`.as('inserted'))
    .executeTakeFirstOrThrow();
  const { inserted: fresh, ...row } = inserted;
  return { row, existing: !fresh };
}

export function findFile(db: Db, sha256: string): Promise<FileRow | undefined> {
  return db.selectFrom('files').selectAll().where('sha256', '=', sha256).executeTakeFirst();
}

/**
 * Mark files as used now (a delivery attaches them), answering those that exist. Takes each row's
 * lock, so a concurrent prune either deleted it first (then it is missing here) or skips it.
 */
export async function touchFiles(db: Db, shas: readonly string[], now: Date): Promise<FileRow[]> {
  if (shas.length === 0) return [];
  return db.updateTable('files').set({ used_at: now }).where('sha256', 'in', [...shas]).returningAll().execute();
}

export function findDownload(db: Db, key: { transport: string; channelId: string; messageId: string; attachmentId: string }): Promise<{ sha256: string; filename: string } | undefined> {
  return db
    .selectFrom('attachment_downloads')
    .select(['sha256', 'filename'])
    .where('transport', '=', key.transport)
    .where('channel_id', '=', key.channelId)
    .where('message_id', '=', key.messageId)
    .where('attachment_id', '=', key.attachmentId)
    .executeTakeFirst();
}

export async function recordDownload(db: Db, key: { transport: string; channelId: string; messageId: string; attachmentId: string }, sha256: string, filename: string, now: Date): Promise<void> {
  await db
    .insertInto('attachment_downloads')
    .values({ transport: key.transport, channel_id: key.channelId, message_id: key.messageId, attachment_id: key.attachmentId, sha256, filename, created_at: now })
    .onConflict((oc) => oc.doNothing())
    .execute();
}

/**
 * Delete files unused since `cutoff` that no delivery record lists (deliveries are kept 8 days,
 * and a pending one is never pruned before its files: its row lists them), and call `remove` for
 * each one's bytes before the commit. Rows another transaction holds (an upload or attach under
 * way) are skipped. A record lists a file when its body's text holds the file's hash: a plain
 * text search, which no row's content can make fail (`body::jsonb` failed on a body holding
 * `\u0000`, every hour for the 8 days the row was kept, and no upload was reclaimed meanwhile); a
 * hash quoted in a message's text keeps the file until that record goes too.
 */
export async function pruneFiles(db: Db, cutoff: Date, remove: (sha256: string) => Promise<void>): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const rows = await sql<{ sha256: string }>`
      select f.sha256 from files f
      where f.used_at < ${cutoff}
        and not exists (
          select 1 from deliveries d
          where strpos(d.body::text, f.sha256) > 0)
      order by f.used_at
      limit 1000
      for update skip locked`.execute(trx);
    const shas = rows.rows.map((r) => r.sha256);
    if (shas.length === 0) return 0;
    await trx.deleteFrom('files').where('sha256', 'in', shas).execute();
    for (const sha of shas) await remove(sha);
    return shas.length;
  });
}
