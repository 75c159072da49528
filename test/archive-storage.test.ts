import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimScrapes, insertScrape } from '../src/modules/archive/archive.repository.js';
import { admin, archiveHarness, messageWith, type ArchiveHarness } from './support/archive.js';
import { waitFor } from './support/wait.js';
import { tablesOf } from '../src/infra/db/tables.js';
import type { ArchiveDb } from '../src/modules/archive/archive.table.js';

/**
 * The storage limit counts every file before it is written, in the database: concurrent steps of
 * several scrapes on several workers (processes' worth) pass the limit by less than one file's cap,
 * storage and each scrape's counters agree at every instant, a failed download gives its room back,
 * and content already stored costs nothing again.
 */

/** A file server standing in for the sandbox's CDN (the trusted origin): each file's bytes come from its URL. */
class FileServer {
  readonly requested: string[] = [];
  readonly gates = new Map<string, Promise<void>>();
  /** Time to first byte, as a CDN across a network has: lets concurrent steps overlap. */
  latencyMs = 0;
  inFlight = 0;
  maxInFlight = 0;
  private readonly server = http.createServer((req, res) => void this.serve(req, res));

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get origin(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /**
   * A file of `size` bytes whose content is named by `content` (two URLs with one content serve
   * the same bytes): `plain` declares its length, `chunked` does not, `cut` stops half way,
   * `stall` answers nothing the first time it is asked (until the client gives up), then as `plain`.
   */
  url(content: string, size: number, style: 'plain' | 'chunked' | 'cut' | 'stall' = 'plain', name = 'x'): string {
    return `${this.origin}/f/${content}/${size}/${style}/${name}.png`;
  }

  static bytes(content: string, size: number): Buffer {
    const head = Buffer.from(`${content}|`);
    return Buffer.concat([head, Buffer.alloc(size - head.length, content.length)]);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const [, , content = '', size = '0', style = 'plain'] = (req.url ?? '').split('/');
    this.requested.push(content);
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    res.on('close', () => (this.inFlight -= 1));
    if (style === 'stall' && this.requested.filter((c) => c === content).length === 1) return;
    await this.gates.get(content);
    if (this.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
    const body = FileServer.bytes(content, Number(size));
    const half = Math.floor(body.length / 2);
    if (style === 'chunked') {
      res.writeHead(200, { 'content-type': 'image/png' });
      res.write(body.subarray(0, half));
      res.end(body.subarray(half));
    } else if (style === 'cut') {
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': body.length });
      res.write(body.subarray(0, half), () => res.destroy());
    } else {
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': body.length });
      res.end(body);
    }
  }
}

/** What the database holds: stored bytes as kept, as summed over files, and reservations left. */
async function ledger(h: ArchiveHarness): Promise<{ kept: number; files: number; reservations: number; perScrape: Map<string, number> }> {
  const db = h.store.db;
  const kept = Number((await db.selectFrom('media_storage').select('used_bytes').executeTakeFirstOrThrow()).used_bytes);
  const files = Number((await sql<{ n: string }>`select coalesce(sum(size_bytes), 0) as n from media_blobs`.execute(db)).rows[0]?.n);
  const reservations = Number((await sql<{ n: string }>`select count(*) as n from media_reservations`.execute(db)).rows[0]?.n);
  const rows = await sql<{ scrape_id: string; n: string }>`
    select i.scrape_id, sum(b.size_bytes) as n
    from (select distinct scrape_id, sha256 from media_items where sha256 is not null) i join media_blobs b on b.sha256 = i.sha256
    group by i.scrape_id`.execute(db);
  return { kept, files, reservations, perScrape: new Map(rows.rows.map((r) => [r.scrape_id, Number(r.n)])) };
}

const CAP = 4_096;

describe('the storage limit under concurrent download steps', () => {
  const limit = 20_000;
  let files: FileServer;
  let h: ArchiveHarness;
  beforeAll(async () => {
    files = await new FileServer().start();
    files.latencyMs = 20;
    // Two workers of two steps each: four steps at once, as two processes would run them.
    h = await archiveHarness({ limits: { limitBytes: limit, warnPercent: 80, overrunPercent: 100 }, policy: { hosts: [], trustedOrigins: [files.origin], maxBytes: CAP }, workers: 2 });
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    await files?.close();
  });

  it('four scrapes on two workers pass the limit by less than one file, and every counter agrees', async () => {
    const channels = ['345678901234567201', '345678901234567202', '345678901234567203', '345678901234567204'];
    for (const [c, channel] of channels.entries()) {
      h.memory.archived.set(
        channel,
        Array.from({ length: 40 }, (_, i) => messageWith(channel, i, files.url(`c${c}m${i}`, 1_500 + ((i * 397) % 2_000), i % 5 === 0 ? 'chunked' : i % 7 === 3 ? 'cut' : 'plain'))),
      );
    }
    const ids = [];
    for (const channel of channels) ids.push(await h.download(channel));
    h.start();
    const ended = await Promise.all(ids.map((id) => h.settled(id)));

    const storage = await h.media.storageStatus();
    console.log(`limit ${limit} B, cap ${CAP} B per file, 4 scrapes on 2 workers (at most ${files.maxInFlight} downloads at once): stored ${storage.usedBytes} B, ${storage.usedBytes - limit} B past the limit`);
    expect(files.maxInFlight).toBeGreaterThan(1);
    expect(storage.usedBytes).toBeGreaterThanOrEqual(limit);
    expect(storage.usedBytes).toBeLessThan(limit + CAP);
    for (const s of ended) expect(s).toMatchObject({ state: 'paused', pauseReason: expect.stringContaining('storage limit reached') });

    // Storage as kept, as summed over the files, and as each scrape counts it: one number.
    const book = await ledger(h);
    expect(book.kept).toBe(storage.usedBytes);
    expect(book.files).toBe(storage.usedBytes);
    expect(storage.scrapes.reduce((n, s) => n + s.bytes, 0)).toBe(storage.usedBytes);
    for (const s of ended) expect(s.bytes).toBe(book.perScrape.get(s.id) ?? 0);
    // Every reservation was committed or given back (a cut file's too).
    expect(book.reservations).toBe(0);
    const failed = (await Promise.all(ids.map((id) => h.media.queryMedia({ scrapeId: id, limit: 200 }, admin)))).flatMap((p) => p.items).filter((i) => i.state === 'failed');
    expect(failed.length).toBeGreaterThan(0);
  });
});

describe('storage and scrape counters while a step is storing files', () => {
  let files: FileServer;
  let h: ArchiveHarness;
  beforeAll(async () => {
    files = await new FileServer().start();
    h = await archiveHarness({ limits: { limitBytes: 10_000_000, warnPercent: 80, overrunPercent: 100 }, policy: { hosts: [], trustedOrigins: [files.origin], maxBytes: CAP } });
    h.start();
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    await files?.close();
  });

  const first = '345678901234567301';
  let firstId = '';

  it('mid-step, each stored file is counted in storage and in its scrape at once', async () => {
    h.memory.archived.set(first, Array.from({ length: 5 }, (_, i) => messageWith(first, i, files.url(`d${i}`, 1_000 + i * 100))));
    // Hold the third file of the page (newest first: d4, d3, then d2) until the counters are read.
    let open!: () => void;
    files.gates.set('d2', new Promise<void>((resolve) => (open = resolve)));
    firstId = await h.download(first);
    await waitFor(() => files.requested.includes('d2'), 'the step to reach the third file');
    const mid = await h.media.storageStatus();
    expect(mid.usedBytes).toBe(1_400 + 1_300);
    expect(mid.scrapes).toMatchObject([{ id: firstId, bytes: mid.usedBytes }]);
    expect((await h.media.getScrape(firstId, admin))?.itemsFound).toBe(2);
    expect((await h.media.queryMedia({ scrapeId: firstId }, admin)).items.map((i) => [i.state, i.sizeBytes])).toEqual([
      ['stored', 1_400],
      ['stored', 1_300],
    ]);
    open();
    const done = await h.settled(firstId);
    expect(done).toMatchObject({ state: 'completed', itemsFound: 5, bytes: 6_000 });
    expect((await h.media.storageStatus()).usedBytes).toBe(6_000);
  });

  it('content already stored costs nothing again: under another URL, or the same URL in another scrape', async () => {
    const copies = '345678901234567302';
    const again = '345678901234567303';
    h.memory.archived.set(copies, Array.from({ length: 5 }, (_, i) => messageWith(copies, i, files.url(`d${i}`, 1_000 + i * 100, 'plain', 'copy'))));
    h.memory.archived.set(again, (h.memory.archived.get(first) ?? []).map((m, i) => messageWith(again, i, m.attachments[0]?.url ?? '')));
    const requestsBefore = files.requested.length;
    const copiesDone = await h.settled(await h.download(copies));
    // Fetched (their URLs are new), found stored by content: storage does not grow.
    expect(files.requested.length - requestsBefore).toBe(5);
    expect(copiesDone).toMatchObject({ state: 'completed', bytes: 6_000 });
    const againDone = await h.settled(await h.download(again));
    // URLs fetched before are not fetched again.
    expect(files.requested.length - requestsBefore).toBe(5);
    expect(againDone).toMatchObject({ state: 'completed', bytes: 6_000, itemsFound: 5 });
    const storage = await h.media.storageStatus();
    expect(storage.usedBytes).toBe(6_000);
    expect(storage.scrapes.map((s) => s.bytes)).toEqual([6_000, 6_000, 6_000]);
    const book = await ledger(h);
    expect([book.kept, book.files, book.reservations]).toEqual([6_000, 6_000, 0]);
    // Deleting two of the three scrapes keeps the files; deleting the last frees them.
    await h.media.deleteScrape(firstId, admin);
    await h.media.deleteScrape(copiesDone.id, admin);
    expect((await h.media.storageStatus()).usedBytes).toBe(6_000);
    await h.media.deleteScrape(againDone.id, admin);
    expect((await h.media.storageStatus()).usedBytes).toBe(0);
    expect((await ledger(h)).kept).toBe(0);
  });
});

describe('a reservation lives only as long as its step', () => {
  let h: ArchiveHarness;
  beforeAll(async () => {
    // No worker runs: the test takes the leases itself.
    h = await archiveHarness({ limits: { limitBytes: 20_000, warnPercent: 80, overrunPercent: 100 }, policy: { hosts: [], trustedOrigins: [], maxBytes: CAP } });
  }, 120_000);
  afterAll(async () => h?.close());

  it('room held by a live step is busy; a step whose process died (lease passed) or that ended holds none', async () => {
    const db = h.store.db;
    const now = new Date();
    for (const id of ['a', 'b']) await insertScrape(tablesOf<ArchiveDb>(db), { id, channelId: `34567890123456740${id === 'a' ? 1 : 2}`, channelName: null, guildId: null, mode: 'download', now });
    const [a] = await claimScrapes(tablesOf<ArchiveDb>(db), 'worker-a', now, 60_000, 1);
    const [b] = await claimScrapes(tablesOf<ArchiveDb>(db), 'worker-b', now, 60_000, 1);
    if (a === undefined || b === undefined || a.lease_expires_at === null || b.lease_expires_at === null) throw new Error('not claimed');
    const stepA = h.media.storageBudget(a.id, { owner: 'worker-a', expiresAt: a.lease_expires_at });
    const stepB = h.media.storageBudget(b.id, { owner: 'worker-b', expiresAt: b.lease_expires_at });
    // Room while stored + reserved is under the limit: past it by one file at most.
    expect(await stepA.reserve(15_000)).toMatchObject({ ok: true });
    const first = await stepB.reserve(CAP);
    expect(first).toMatchObject({ ok: true });
    expect(await stepB.reserve(CAP)).toMatchObject({ ok: true });
    expect(await stepB.reserve(1)).toEqual({ ok: false, noRoom: 'busy' });
    // Given back, room is free at once.
    if (first.ok) await stepB.release(first.reservation);
    expect(await stepB.reserve(CAP)).toMatchObject({ ok: true });
    expect(await stepB.reserve(1)).toEqual({ ok: false, noRoom: 'busy' });
    // Worker A dies: once its lease has passed, its reservation no longer counts.
    await db.updateTable('media_scrapes').set({ lease_expires_at: new Date(Date.now() - 1) }).where('id', '=', a.id).execute();
    expect(await stepB.reserve(10_000)).toMatchObject({ ok: true });
    // The same worker claiming the scrape again is another step: the old step's room is not revived.
    const later = new Date(Date.now() + 1_000);
    await db.updateTable('media_scrapes').set({ lease_owner: null, lease_expires_at: null }).where('id', '=', b.id).execute();
    const again = (await claimScrapes(tablesOf<ArchiveDb>(db), 'worker-b', later, 60_000, 2)).find((s) => s.id === b.id);
    if (again === undefined || again.lease_expires_at === null) throw new Error('not claimed again');
    const next = h.media.storageBudget(again.id, { owner: 'worker-b', expiresAt: again.lease_expires_at });
    expect(await next.reserve(20_000)).toMatchObject({ ok: true });
    expect(await next.reserve(1)).toEqual({ ok: false, noRoom: 'busy' });
    // Storage itself at the limit: full, not busy.
    await db.deleteFrom('media_reservations').execute();
    await db.insertInto('media_blobs').values({ sha256: 'e'.repeat(64), size_bytes: 20_000, content_type: 'image/png', path: 'ee/ee/none', created_at: now }).execute();
    expect(await next.reserve(1)).toEqual({ ok: false, noRoom: 'full' });
  });
});

describe('a download step whose lease ends mid-page', () => {
  let files: FileServer;
  let h: ArchiveHarness;
  beforeAll(async () => {
    files = await new FileServer().start();
    // The worker aborts a step a second before its lease ends: 3 s into it.
    h = await archiveHarness({ limits: { limitBytes: 10_000_000, warnPercent: 80, overrunPercent: 100 }, policy: { hosts: [], trustedOrigins: [files.origin], maxBytes: CAP }, leaseMs: 4_000 });
    h.start();
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    await files?.close();
  });

  it('records the messages it finished; the next step downloads the rest instead of failing them', async () => {
    const channel = '345678901234567501';
    // Newest first: s2 is stored, s1 stalls until the step gives up, s0 waits for the next step.
    h.memory.archived.set(channel, [messageWith(channel, 0, files.url('s0', 1_000)), messageWith(channel, 1, files.url('s1', 1_100, 'stall')), messageWith(channel, 2, files.url('s2', 1_200))]);
    const done = await h.settled(await h.download(channel));
    expect(files.requested.filter((c) => c === 's1')).toHaveLength(2);
    expect(done).toMatchObject({ state: 'completed', messagesSeen: 3, itemsFound: 3, errors: 0, bytes: 3_300 });
    expect((await h.media.queryMedia({ scrapeId: done.id }, admin)).items.map((i) => i.state)).toEqual(['stored', 'stored', 'stored']);
  });
});
