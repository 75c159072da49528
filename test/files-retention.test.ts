import { Readable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileStore } from '../src/modules/files/files.service.js';
import type { FilesDb } from '../src/modules/files/files.table.js';
import { createLogger } from '../src/infra/log.js';
import { tablesOf } from '../src/infra/db/tables.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { TestClock } from './support/herald.js';

// Files expire with their deliveries: an upload no delivery lists is deleted HERALD_FILE_TTL_HOURS
// after its last use; one a delivery record lists (pending or not) is kept while that record is.
describe('file retention', () => {
  let fixture: MigratedStore;
  let files: FileStore;
  const clock = new TestClock();
  const HOUR = 3_600_000;

  beforeAll(async () => {
    fixture = await migratedStore();
    files = new FileStore(tablesOf<FilesDb>(fixture.store.db), clock, { dir: path.join(fixture.db.dataDir, 'files'), maxBytes: 10_000, ttlMs: 24 * HOUR, log: createLogger('silent') });
  });
  afterAll(() => fixture.close());

  const exists = (sha: string): Promise<boolean> => stat(files.pathOf(sha)).then(() => true, () => false);

  it('deletes an unreferenced file after the TTL, and keeps one a pending delivery lists', async () => {
    const loose = await files.store(Readable.from([randomBytes(100)]), { filename: 'loose.bin', contentType: 'application/octet-stream' });
    const kept = await files.store(Readable.from([randomBytes(100)]), { filename: 'kept.bin', contentType: 'application/octet-stream' });
    const now = clock.now();
    await fixture.store.db
      .insertInto('deliveries')
      .values({
        request_id: 'e'.repeat(64),
        kind: 'post',
        target: JSON.stringify({ guild_id: '234567890123456789', destination: 'alerts' }),
        body: JSON.stringify({ content: 'x', attachments: [{ file: kept.file, filename: 'kept.bin' }] }),
        payload_hash: 'h',
        status: 'pending',
        failure_code: null,
        created_at: now,
        next_attempt_at: now,
      })
      .execute();
    // Inside the TTL nothing goes.
    expect(await files.prune(new Date(clock.now().getTime() + 23 * HOUR))).toBe(0);
    // Past it: the loose file goes (row and bytes), the listed one stays.
    expect(await files.prune(new Date(clock.now().getTime() + 25 * HOUR))).toBe(1);
    expect(await files.find(loose.file)).toBeUndefined();
    expect(await exists(loose.file)).toBe(false);
    expect(await files.find(kept.file)).toBeDefined();
    expect(await exists(kept.file)).toBe(true);
    // Once the delivery's record is gone (retention), its file goes with the next prune past the TTL.
    await fixture.store.db.deleteFrom('deliveries').where('request_id', '=', 'e'.repeat(64)).execute();
    expect(await files.prune(new Date(clock.now().getTime() + 25 * HOUR))).toBe(1);
    expect(await exists(kept.file)).toBe(false);
  });

  it('a delivery record holding U+0000 or a lone surrogate cannot stop the prune (body::jsonb failed on it every hour for its 8 days)', async () => {
    const loose = await files.store(Readable.from([randomBytes(100)]), { filename: 'loose.bin', contentType: 'application/octet-stream' });
    const kept = await files.store(Readable.from([randomBytes(100)]), { filename: 'kept.bin', contentType: 'application/octet-stream' });
    const now = clock.now();
    // As an older Herald stored them (its accept let both in): json text with the escapes.
    const bodies = ['{"content":"a\\u0000b"}', '{"content":"a\\ud800b"}', `{"content":"\\udc00","attachments":[{"file":"${kept.file}","filename":"kept.bin"}]}`];
    for (const [i, body] of bodies.entries()) {
      await sql`insert into deliveries (request_id, kind, target, body, payload_hash, status, created_at, next_attempt_at)
        values (${String(i).repeat(64)}, 'post', '{"guild_id":"234567890123456789","destination":"alerts"}'::json, ${body}::json, 'h', 'pending', ${now}, ${now})`.execute(fixture.store.db);
    }
    expect(await files.prune(new Date(clock.now().getTime() + 25 * HOUR))).toBe(1);
    expect(await exists(loose.file)).toBe(false);
    // The record that lists a file keeps it, whatever else its text holds.
    expect(await exists(kept.file)).toBe(true);
    await sql`delete from deliveries`.execute(fixture.store.db);
  });
});
