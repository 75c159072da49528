import { existsSync, readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_IDS, SANDBOX_MEDIA_CHANNEL, SANDBOX_MEMBER_IDS } from '../src/platforms/discord/sandbox/sandbox.js';
import { startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

interface Scrape {
  id: string;
  state: string;
  messagesSeen: number;
  itemsFound: number;
  bytes: number;
  errors: number;
  cursor: string | null;
  pauseReason: string | null;
}
interface Item {
  id: string;
  messageId: string;
  kind: string;
  source: string;
  url: string;
  state: string;
  sha256: string | null;
  localPath: string | null;
  postedAt: string;
  authorId: string;
  content: string;
  error: string | null;
  sizeBytes: number | null;
}

/** Every media item the generated channel holds, counted from its messages as the sandbox lists them. */
function expectedItems(h: TestHerald): number {
  const media = h.sandbox.media;
  if (media === undefined) throw new Error('no media channel');
  let n = 0;
  for (let i = 0; i < media.count; i++) {
    const m = media.message(i) as { content: string; attachments: unknown[]; embeds: { image?: unknown; thumbnail?: unknown }[] };
    n += m.attachments.length;
    for (const e of m.embeds) n += (e.image ? 1 : 0) + (e.thumbnail ? 1 : 0);
    n += (m.content.match(/https?:\/\/\S+\.(png|mp4)/g) ?? []).length;
  }
  return n;
}

async function waitForScrape(h: TestHerald, id: string, state: string, timeoutMs = 150_000): Promise<Scrape> {
  return waitFor(async () => {
    const s = (await h.admin.get(`/admin/archive/scrapes/${id}`)).json as Scrape;
    return s.state === state ? s : undefined;
  }, `scrape ${id} to be ${state}`, timeoutMs);
}

/**
 * Evidence that the stopped scrape `id` reads no more, without a quiet period: once it holds no
 * lease (a step in flight at the stop records its page, then lets go), note the scrape and the
 * platform reads of its channel; then start another scrape (of an empty channel) and wait until
 * it completed: the scrape worker has claimed and run a step after the note. The stopped scrape
 * must be as it was, still unleased, and its channel read no more. The other scrape is deleted.
 */
async function expectStoppedStill(h: TestHerald, id: string, channelId: string): Promise<Scrape> {
  const get = async (): Promise<Scrape> => (await h.admin.get(`/admin/archive/scrapes/${id}`)).json as Scrape;
  const lease = async (): Promise<string | null | undefined> => (await h.herald.store.db.selectFrom('media_scrapes').select('lease_owner').where('id', '=', id).executeTakeFirst())?.lease_owner;
  const reads = (): number => h.sandbox.requests.filter((r) => r.method === 'GET' && r.path === `/channels/${channelId}/messages`).length;
  await waitFor(async () => (await lease()) === null, 'the stopped scrape to hold no lease');
  const before = await get();
  const readsBefore = reads();
  const other = await h.admin.post('/admin/archive/scrapes', { channelId: SANDBOX_IDS.channels.ops, mode: 'links' });
  expect(other.status).toBe(201);
  const otherId = (other.json as Scrape).id;
  await waitForScrape(h, otherId, 'completed');
  expect(await get()).toEqual(before);
  expect(before.state).toBe('stopped');
  expect(await lease()).toBeNull();
  expect(reads()).toBe(readsBefore);
  expect((await h.admin.delete(`/admin/archive/scrapes/${otherId}`)).status).toBe(204);
  return before;
}

async function allItems(h: TestHerald, query: string): Promise<Item[]> {
  const items: Item[] = [];
  let cursor: string | null = null;
  do {
    const res = await h.bridge.get(`/admin/archive/media?limit=200${query}${cursor !== null ? `&cursor=${cursor}` : ''}`);
    expect(res.status).toBe(200);
    const page = res.json as { items: Item[]; nextCursor: string | null };
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor !== null);
  return items;
}

// 5,000 messages (51 pages) walk the same paths as the sandbox's default 20,000 at a quarter of the
// CPU; `npm run bench` scrapes the 20,000 against Discord's pace (docs/guides/testing.md).
describe('media archive: a links scrape of a 5,000-message sandbox channel', { timeout: 180_000 }, () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ sandbox: { mediaMessages: 5_000 } });
  }, 180_000);
  afterAll(async () => h.close());

  it('walks the whole history page by page, indexes every item once, paced (no 429)', async () => {
    const started = Date.now();
    const res = await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' });
    expect(res.status).toBe(201);
    const id = (res.json as Scrape).id;
    const again = await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' });
    expect(again.status).toBe(409);
    expect(again.json).toEqual({ error: 'a scrape of this channel is already running', scrapeId: id });
    const done = await waitForScrape(h, id, 'completed');
    const ms = Date.now() - started;
    console.log(`links scrape of 5,000 messages: ${ms} ms`);
    expect(done.messagesSeen).toBe(5_000);
    const expected = expectedItems(h);
    expect(done.itemsFound).toBe(expected);
    expect(h.sandbox.requests.filter((r) => r.status === 429)).toEqual([]);
    const pages = h.sandbox.requests.filter((r) => r.method === 'GET' && r.path === `/channels/${SANDBOX_MEDIA_CHANNEL}/messages`);
    expect(pages.length).toBe(51);

    const items = await allItems(h, `&scrapeId=${id}`);
    expect(items.length).toBe(expected);
    expect(new Set(items.map((i) => i.id)).size).toBe(expected);
    expect(items.every((i) => i.state === 'linked' && i.sha256 === null && i.localPath === null)).toBe(true);
    // Newest first.
    const times = items.map((i) => i.postedAt);
    expect([...times].sort().reverse()).toEqual(times);
    all = items;
    scrapeId = id;
  });

  let all: Item[] = [];
  let scrapeId = '';

  it('filters by kind, source, scrape, channel, guild, author, time and text, each page by cursor', async () => {
    const check = async (query: string, keep: (i: Item) => boolean): Promise<void> => {
      const got = await allItems(h, query);
      const want = all.filter(keep);
      expect(want.length, query).toBeGreaterThan(0);
      expect(got.map((i) => i.id), query).toEqual(want.map((i) => i.id));
    };
    await check('&kind=video', (i) => i.kind === 'video');
    await check('&kind=file', (i) => i.kind === 'file');
    await check('&source=link', (i) => i.source === 'link');
    await check('&source=embed&kind=image', (i) => i.source === 'embed' && i.kind === 'image');
    await check(`&scrapeId=${scrapeId}&channelId=${SANDBOX_MEDIA_CHANNEL}&guildId=${SANDBOX_IDS.guild}`, () => true);
    await check(`&author=${SANDBOX_MEMBER_IDS.manager}`, (i) => i.authorId === SANDBOX_MEMBER_IDS.manager);
    const middle = all[Math.floor(all.length / 2)]?.postedAt ?? '';
    const late = all[Math.floor(all.length / 3)]?.postedAt ?? '';
    await check(`&after=${encodeURIComponent(middle)}&before=${encodeURIComponent(late)}`, (i) => i.postedAt > middle && i.postedAt < late);
    await check('&text=HARBOUR&kind=image', (i) => i.content.toLowerCase().includes('harbour') && i.kind === 'image');
    await check('&text=clip%3A', (i) => i.content.includes('clip:'));
    // LIKE's wildcards are plain characters in text.
    expect(((await h.bridge.get('/admin/archive/media?text=%25')).json as { items: unknown[] }).items).toEqual([]);
    // Nothing for another guild or channel.
    expect(((await h.bridge.get(`/admin/archive/media?guildId=${SANDBOX_IDS.otherGuild}`)).json as { items: unknown[] }).items).toEqual([]);
    // Invalid filters are a 400 with a reason, not an empty answer.
    for (const bad of ['kind=picture', 'after=yesterday', 'after=2025-13-45', 'limit=0', 'cursor=%21%21', 'channelId=abc']) {
      const res = await h.bridge.get(`/admin/archive/media?${bad}`);
      expect(res.status, bad).toBe(400);
    }
    const forged = await h.bridge.get(`/admin/archive/media?cursor=${Buffer.from('x').toString('base64url')}`);
    expect(forged.json).toEqual({ error: 'cursor is not one this query returned' });
  });

  it('pages stay stable while items are added', async () => {
    const first = (await h.bridge.get('/admin/archive/media?limit=100')).json as { items: Item[]; nextCursor: string };
    expect(first.items.map((i) => i.id)).toEqual(all.slice(0, 100).map((i) => i.id));
    // A second scrape of the same channel indexes every item again, newest first, while we page.
    const again = await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' });
    expect(again.status).toBe(201);
    await waitFor(async () => ((await h.bridge.get(`/admin/archive/scrapes/${(again.json as Scrape).id}`)).json as Scrape).itemsFound > 500, 'the second scrape to index items');
    const second = (await h.bridge.get(`/admin/archive/media?limit=100&scrapeId=${scrapeId}&cursor=${first.nextCursor}`)).json as { items: Item[] };
    expect(second.items.map((i) => i.id)).toEqual(all.slice(100, 200).map((i) => i.id));
    await h.bridge.post(`/admin/archive/scrapes/${(again.json as Scrape).id}/stop`, undefined);
    // A step in flight when it stopped finishes its page; then nothing more is read.
    await expectStoppedStill(h, (again.json as Scrape).id, SANDBOX_MEDIA_CHANNEL);
  });

  it('answers one item with its message link; reads never call the platform', async () => {
    const before = h.sandbox.requests.length;
    const item = all[5] as Item;
    const res = await h.bridge.get(`/admin/archive/media/${item.id}`);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ id: item.id, url: item.url, messageUrl: `https://discord.com/channels/${SANDBOX_IDS.guild}/${SANDBOX_MEDIA_CHANNEL}/${item.messageId}` });
    expect((await h.bridge.get('/admin/archive/media/999999999')).json).toEqual({ error: 'media item not found' });
    expect((await h.bridge.get('/admin/archive/media/x1')).status).toBe(404);
    await h.bridge.get('/admin/archive/scrapes');
    await h.bridge.get('/admin/archive/storage');
    await h.bridge.get(`/admin/archive/media?limit=10`);
    expect(h.sandbox.requests.slice(before).filter((r) => !r.path.startsWith('/gateway'))).toEqual([]);
  });
});

describe('media archive: stop and resume', { timeout: 180_000 }, () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ sandbox: { mediaMessages: 5_000 } });
  }, 180_000);
  afterAll(async () => h.close());

  it('a stopped scrape keeps its cursor; starting the channel again resumes it and indexes nothing twice', async () => {
    const id = ((await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' })).json as Scrape).id;
    await waitFor(async () => ((await h.bridge.get(`/admin/archive/scrapes/${id}`)).json as Scrape).messagesSeen >= 1_000, 'a thousand messages read');
    const stop = await h.bridge.post(`/admin/archive/scrapes/${id}/stop`, undefined);
    expect(stop.status).toBe(200);
    expect((stop.json as Scrape).state).toBe('stopped');
    // A step in flight when it stopped still records its page, and then nothing moves.
    const settled = await expectStoppedStill(h, id, SANDBOX_MEDIA_CHANNEL);
    expect(settled.messagesSeen).toBeLessThan(5_000);
    expect(settled.cursor).not.toBeNull();
    const resumed = await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' });
    expect(resumed.status).toBe(200);
    expect(resumed.json).toMatchObject({ id, state: 'running', cursor: settled.cursor });
    const done = await waitForScrape(h, id, 'completed');
    expect(done.messagesSeen).toBe(5_000);
    const expected = expectedItems(h);
    expect(done.itemsFound).toBe(expected);
    const items = await allItems(h, `&scrapeId=${id}`);
    expect(new Set(items.map((i) => `${i.messageId} ${i.url}`)).size).toBe(expected);
    // Stopping an ended scrape answers it as it is.
    expect(((await h.bridge.post(`/admin/archive/scrapes/${id}/stop`, undefined)).json as Scrape).state).toBe('completed');
    expect((await h.bridge.post('/admin/archive/scrapes/0b6f3a52-5d0e-4c36-9f6f-1f2a3b4c5d6e/stop', undefined)).json).toEqual({ error: 'scrape not found' });
  });

  it('refuses a channel the bot cannot see, and a bad body with a reason', async () => {
    expect((await h.bridge.post('/admin/archive/scrapes', { channelId: '345678901234500000', mode: 'links' })).json).toEqual({ error: 'channel not found or not visible to the bot' });
    const bad = await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'everything' });
    expect(bad.status).toBe(400);
    expect((await h.bridge.post('/admin/archive/scrapes', [])).status).toBe(400);
    expect((await h.bridge.get('/admin/archive/scrapes')).json).toMatchObject({ scrapes: [{ channelId: SANDBOX_MEDIA_CHANNEL }] });
  });
});

describe('media archive: download mode, tiers, storage limit and the action log', { timeout: 180_000 }, () => {
  let h: TestHerald;
  // The channel's 1,000 messages store about 440 kB: past the warning (50%), short of the overrun (90%).
  const limit = 700_000;
  beforeAll(async () => {
    h = await startTestHerald({
      sandbox: { mediaMessages: 1_000 },
      env: { HERALD_MEDIA_MAX_FILE_BYTES: String(1024 * 1024), HERALD_MEDIA_LIMIT_BYTES: String(limit), HERALD_MEDIA_WARN_PERCENT: '50', HERALD_MEDIA_OVERRUN_PERCENT: '90' },
    });
  }, 180_000);
  afterAll(async () => h.close());

  let first = '';

  it('download needs the admin tier; delete too; the action log is admin-only', async () => {
    const res = await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'download' }, { headers: { 'x-herald-client': 'mcp' } });
    expect(res.status).toBe(403);
    expect(res.json).toEqual({ error: 'admin token required' });
    expect((await h.bridge.delete('/admin/archive/scrapes/0b6f3a52-5d0e-4c36-9f6f-1f2a3b4c5d6e')).json).toEqual({ error: 'admin token required' });
    expect((await h.bridge.get('/admin/archive/actions')).status).toBe(401);
    expect((await h.bridge.call('GET', '/admin/archive/events')).status).toBe(403);
    const log = (await h.admin.get('/admin/archive/actions')).json as { actions: { actor: string; via: string; action: string; result: string; detail: string | null }[] };
    expect(log.actions.slice(0, 2)).toMatchObject([
      { actor: 'bridge', via: 'http', action: 'delete_scrape', result: 'refused', detail: 'admin token required' },
      { actor: 'bridge', via: 'mcp', action: 'start_scrape:download', result: 'refused', detail: 'admin token required' },
    ]);
  });

  it('stores each file once by content, fetches each URL once, and refuses a foreign host, a redirect and an oversized file', async () => {
    const res = await h.admin.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'download' }, { headers: { 'x-herald-client': 'ui' } });
    expect(res.status).toBe(201);
    first = (res.json as Scrape).id;
    const done = await waitForScrape(h, first, 'completed');
    expect(done.itemsFound).toBe(expectedItems(h));
    const items = await allItems(h, `&scrapeId=${first}`);
    const refused = items.filter((i) => i.state === 'refused');
    expect(refused.map((i) => [i.url.replace(h.sandbox.url, ''), i.error]).sort()).toEqual([
      ['/media-redirect/img-1.png', 'redirect (302) refused'],
      ['/media/huge.bin', 'file larger than 1048576 bytes'],
      ['https://images.example.com/picture.png', 'host images.example.com is not a media host of the platform'],
    ]);
    expect(done.errors).toBe(3);
    const stored = items.filter((i) => i.state === 'stored');
    expect(stored.length).toBe(items.length - 3);
    // Every URL fetched once (huge.bin was started and cut off).
    const counts = new Map<string, number>();
    for (const n of h.sandbox.mediaRequests) counts.set(n, (counts.get(n) ?? 0) + 1);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(counts.size).toBe(new Set(stored.map((i) => i.url)).size + 1);
    // Content-addressed: as many files as distinct contents, each where localPath says, its digest right.
    const digests = new Set(stored.map((i) => i.sha256));
    expect(digests.size).toBeLessThan(counts.size);
    for (const i of stored.slice(0, 50)) {
      expect(existsSync(i.localPath ?? '')).toBe(true);
      expect(createHash('sha256').update(readFileSync(i.localPath ?? '')).digest('hex')).toBe(i.sha256);
    }
    const storage = (await h.bridge.get('/admin/archive/storage')).json as { usedBytes: number; byKind: Record<string, number>; scrapes: { id: string; bytes: number }[] };
    expect(storage.usedBytes).toBeGreaterThan(0);
    expect(storage.byKind['image'] ?? 0).toBeGreaterThan(0);
    expect(storage.byKind['video'] ?? 0).toBeGreaterThan(0);
    expect(Object.values(storage.byKind).reduce((a, b) => a + b, 0)).toBe(storage.usedBytes);
    expect(storage.scrapes.find((s) => s.id === first)?.bytes).toBe(storage.usedBytes);
    expect(done.bytes).toBe(storage.usedBytes);
    // The thumbnail route serves the bytes to the admin tier only.
    const file = await fetch(`${h.url}/admin/archive/files/${stored[0]?.sha256 ?? ''}`, { headers: { authorization: `Bearer ${h.adminToken}` } });
    expect(file.status).toBe(200);
    expect(Buffer.from(await file.arrayBuffer()).length).toBe(stored[0]?.sizeBytes);
  });

  it('past the warning level a new scrape needs confirm; past the overrun a download scrape pauses', async () => {
    const used = ((await h.admin.get('/admin/archive/storage')).json as { usedBytes: number }).usedBytes;
    expect(used).toBeGreaterThan(limit * 0.5);
    expect(used).toBeLessThan(limit * 0.9);
    const warned = await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_IDS.channels.alerts, mode: 'links' });
    expect(warned.status).toBe(428);
    expect(warned.json).toMatchObject({ error: 'confirm required', storage: { level: 'warning' } });
    expect((warned.json as { warning: string }).warning).toContain('repeat with confirm true');
    const confirmed = await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_IDS.channels.alerts, mode: 'links', confirm: true });
    expect(confirmed.status).toBe(201);
    await waitForScrape(h, (confirmed.json as Scrape).id, 'completed');
    // Fill storage past the overrun (90%) with a file of its own, then download again: it pauses.
    await h.herald.store.db.insertInto('media_blobs').values({ sha256: 'f'.repeat(64), size_bytes: limit, content_type: 'image/png', path: 'ff/ff/none', created_at: new Date() }).execute();
    const again = await h.admin.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'download', confirm: true });
    expect(again.status).toBe(201);
    const paused = await waitForScrape(h, (again.json as Scrape).id, 'paused');
    expect(paused.pauseReason).toContain('storage limit reached');
    expect(((await h.admin.get('/admin/archive/storage')).json as { level: string }).level).toBe('overrun');
    await h.herald.store.db.deleteFrom('media_blobs').where('sha256', '=', 'f'.repeat(64)).execute();
    // Resumed (confirm: storage is still past the warning): it finishes, sharing every file with the first scrape.
    const resumed = await h.admin.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'download', confirm: true });
    expect(resumed.status).toBe(200);
    const second = await waitForScrape(h, (again.json as Scrape).id, 'completed');
    expect(second.bytes).toBe(((await h.admin.get(`/admin/archive/scrapes/${first}`)).json as Scrape).bytes);
    const storage = (await h.admin.get('/admin/archive/storage')).json as { usedBytes: number };
    expect(storage.usedBytes).toBe(second.bytes);

    // Deleting the first keeps the files the second references; deleting the second removes them.
    const paths = (await allItems(h, `&scrapeId=${first}&kind=image`)).flatMap((i) => (i.localPath === null ? [] : [i.localPath]));
    expect(paths.length).toBeGreaterThan(100);
    expect((await h.admin.delete(`/admin/archive/scrapes/${first}`)).status).toBe(204);
    expect(paths.every((p) => existsSync(p))).toBe(true);
    expect(((await h.admin.get('/admin/archive/storage')).json as { usedBytes: number }).usedBytes).toBe(second.bytes);
    expect((await h.admin.delete(`/admin/archive/scrapes/${second.id}`)).status).toBe(204);
    expect(paths.some((p) => existsSync(p))).toBe(false);
    expect(((await h.admin.get('/admin/archive/storage')).json as { usedBytes: number }).usedBytes).toBe(0);
    expect((await h.admin.delete(`/admin/archive/scrapes/${second.id}`)).json).toEqual({ error: 'scrape not found' });
  });

  it('the action log pages through who did what, when, and how it ended', async () => {
    const seen: { id: string; action: string; actor: string; via: string; result: string; at: string }[] = [];
    let cursor: string | null = null;
    do {
      const res = await h.admin.get(`/admin/archive/actions?limit=7${cursor !== null ? `&cursor=${cursor}` : ''}`);
      const page = res.json as { actions: typeof seen; nextCursor: string | null };
      seen.push(...page.actions);
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(new Set(seen.map((a) => a.id)).size).toBe(seen.length);
    expect(seen.map((a) => Number(a.id))).toEqual([...seen.map((a) => Number(a.id))].sort((a, b) => b - a));
    const mine = seen.filter((a) => a.action === 'delete_scrape' || a.action.startsWith('start_scrape'));
    expect(mine).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ action: 'delete_scrape', actor: 'admin', via: 'http', result: 'ok' }),
        expect.objectContaining({ action: 'delete_scrape', actor: 'admin', result: 'refused' }),
        expect.objectContaining({ action: 'start_scrape:download', actor: 'admin', via: 'ui', result: 'ok' }),
        expect.objectContaining({ action: 'start_scrape:links', actor: 'bridge', result: 'refused' }),
      ]),
    );
  });
});
