import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_MEDIA_CHANNEL } from '../src/sandbox/sandbox.js';
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

async function waitForScrape(h: TestHerald, id: string, state: string, timeoutMs = 60_000): Promise<Scrape> {
  return waitFor(async () => {
    const s = (await h.admin.get(`/admin/archive/scrapes/${id}`)).json as Scrape;
    return s.state === state ? s : undefined;
  }, `scrape ${id} to be ${state}`, timeoutMs);
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

describe('media archive: a links scrape of the 20,000-message sandbox channel', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
  });
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
    console.log(`links scrape of 20,000 messages: ${ms} ms`);
    expect(done.messagesSeen).toBe(20_000);
    const expected = expectedItems(h);
    expect(done.itemsFound).toBe(expected);
    expect(h.sandbox.requests.filter((r) => r.status === 429)).toEqual([]);
    const pages = h.sandbox.requests.filter((r) => r.method === 'GET' && r.path === `/channels/${SANDBOX_MEDIA_CHANNEL}/messages`);
    expect(pages.length).toBe(201);

    const items = await allItems(h, `&scrapeId=${id}`);
    expect(items.length).toBe(expected);
    expect(new Set(items.map((i) => i.id)).size).toBe(expected);
    expect(items.every((i) => i.state === 'linked' && i.sha256 === null && i.localPath === null)).toBe(true);
    // Newest first.
    const times = items.map((i) => i.postedAt);
    expect([...times].sort().reverse()).toEqual(times);
  });
});
