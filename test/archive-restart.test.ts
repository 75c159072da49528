import { describe, expect, it } from 'vitest';
import { client } from './support/client.js';
import { crashRig, SANDBOX_MEDIA_CHANNEL } from './support/rigs.js';
import { waitFor } from './support/wait.js';

/**
 * A Herald killed (SIGKILL) in the middle of a scrape: the next Herald takes the scrape over when
 * its lease expires and continues from the stored cursor, indexing no item twice.
 */
describe('a scrape survives a Herald killed mid-scrape', () => {
  const { sandbox, bridgeToken, adminToken, database, start } = crashRig({ env: { HERALD_DISCORD_TIMEOUT_MS: '1000', HERALD_LEASE_MS: '2500', HERALD_GATEWAY: 'off' } });

  it('resumes from its cursor after a restart, every message read once, every item indexed once', async () => {
    await database();
    const first = await start();
    const admin = client(first.url ?? '', adminToken);
    const started = await admin.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' });
    expect(started.status).toBe(201);
    const id = (started.json as { id: string }).id;
    const seen = await waitFor(async () => {
      const s = (await admin.get(`/admin/archive/scrapes/${id}`)).json as { messagesSeen: number; cursor: string };
      return s.messagesSeen >= 5_000 ? s : undefined;
    }, 'a quarter of the channel read');
    first.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    const pagesBefore = sandbox.requests.filter((r) => r.path === `/channels/${SANDBOX_MEDIA_CHANNEL}/messages`).length;

    const second = await start();
    const api = client(second.url ?? '', bridgeToken);
    const done = await waitFor(async () => {
      const s = (await api.get(`/admin/archive/scrapes/${id}`)).json as { state: string; messagesSeen: number; itemsFound: number };
      return s.state === 'completed' ? s : undefined;
    }, 'the scrape to complete after the restart', 90_000);
    expect(done.messagesSeen).toBe(20_000);
    const pagesAfter = sandbox.requests.filter((r) => r.path === `/channels/${SANDBOX_MEDIA_CHANNEL}/messages`).length - pagesBefore;
    // From the cursor: the pages left (and the one in flight when it died), not the channel again.
    expect(pagesAfter).toBeLessThanOrEqual(201 - Math.floor(seen.messagesSeen / 100) + 1);
    const keys = new Set<string>();
    let cursor: string | null = null;
    let n = 0;
    do {
      const page = (await api.get(`/admin/archive/media?limit=200&scrapeId=${id}${cursor !== null ? `&cursor=${cursor}` : ''}`)).json as { items: { messageId: string; url: string }[]; nextCursor: string | null };
      for (const i of page.items) keys.add(`${i.messageId} ${i.url}`);
      n += page.items.length;
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(n).toBe(done.itemsFound);
    expect(keys.size).toBe(n);
  }, 240_000);
});
