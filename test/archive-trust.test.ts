import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archiveModule } from '../src/modules/archive/index.js';
import { blobRelativePath } from '../src/modules/archive/media.js';
import { SANDBOX_MEDIA_CHANNEL } from '../src/platforms/discord/sandbox/sandbox.js';
import { csp } from './support/csp.js';
import { startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';


/**
 * What the archive lets a browser do (issue 19): the operator's browser fetches only what Herald
 * stored, and a stored file never runs as a page of Herald's origin. And what its action log keeps:
 * changes and refusals, for as long as Herald's other records.
 */
describe('the media archive: what browsers are told, and what the action log keeps', { timeout: 120_000 }, () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ sandbox: { mediaMessages: 60 }, env: { HERALD_MEDIA_MAX_FILE_BYTES: String(1024 * 1024) } });
  }, 120_000);
  afterAll(async () => h?.close());

  it('the UI page loads images and media only from Herald (no remote URL, no data:) and sends no Referer', async () => {
    for (const p of ['/ui/archive', '/ui/archive/archive.js', '/ui/archive/archive.css']) {
      const res = await fetch(`${h.url}${p}`);
      expect(res.status, p).toBe(200);
      expect(res.headers.get('referrer-policy'), p).toBe('no-referrer');
      expect(res.headers.get('x-content-type-options'), p).toBe('nosniff');
      const policy = csp(res.headers.get('content-security-policy'));
      for (const directive of ['img-src', 'media-src']) {
        const sources = policy.get(directive) ?? policy.get('default-src') ?? ['*'];
        expect(sources.every((s) => s === "'self'" || s === 'blob:' || s === "'none'"), `${p} ${directive}: ${sources.join(' ')}`).toBe(true);
      }
      for (const directive of ['default-src', 'connect-src', 'script-src']) {
        expect((policy.get(directive) ?? []).every((s) => s === "'self'" || s === "'none'"), `${p} ${directive}`).toBe(true);
      }
      expect(policy.get('frame-ancestors'), p).toEqual(["'none'"]);
    }
  });

  it('serves a favicon of its own, from this server', async () => {
    const page = await (await fetch(`${h.url}/ui/archive`)).text();
    const icon = /<link rel="icon"[^>]*href="([^"]+)"/.exec(page)?.[1];
    expect(icon).toMatch(/^\/ui\/archive\//);
    const res = await fetch(`${h.url}${icon ?? ''}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/svg+xml');
    expect(await res.text()).toMatch(/^<svg /);
  });

  it('serves stored raster images, audio and video inline, and SVG, HTML and any other type as an attachment', async () => {
    const db = h.herald.store.db;
    const cases: [string, string, 'inline' | 'attachment'][] = [
      ['image/svg+xml', '1', 'attachment'],
      ['IMAGE/SVG+XML', '2', 'attachment'],
      ['text/html', '3', 'attachment'],
      ['application/pdf', '4', 'attachment'],
      ['application/octet-stream', '5', 'attachment'],
      ['image/x-unknown', '6', 'attachment'],
      ['image/png', '7', 'inline'],
      ['image/jpeg', '8', 'inline'],
      ['image/webp', '9', 'inline'],
      ['video/mp4', 'a', 'inline'],
      ['audio/ogg', 'b', 'inline'],
    ];
    for (const [type, digit, disposition] of cases) {
      const sha256 = digit.repeat(64);
      const rel = blobRelativePath(sha256);
      mkdirSync(path.dirname(path.join(h.herald.use(archiveModule).media.mediaDir, rel)), { recursive: true });
      writeFileSync(path.join(h.herald.use(archiveModule).media.mediaDir, rel), type === 'image/svg+xml' ? '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>' : 'bytes');
      await db.insertInto('media_blobs').values({ sha256, size_bytes: 5, content_type: type, path: rel, created_at: new Date() }).execute();
      const res = await fetch(`${h.url}/admin/archive/files/${sha256}`, { headers: { authorization: `Bearer ${h.adminToken}` } });
      expect(res.status, type).toBe(200);
      expect(res.headers.get('content-disposition')?.split(';')[0], type).toBe(disposition);
      expect(res.headers.get('x-content-type-options'), type).toBe('nosniff');
      expect(res.headers.get('referrer-policy'), type).toBe('no-referrer');
      expect(csp(res.headers.get('content-security-policy')).has('sandbox'), type).toBe(true);
      await res.arrayBuffer();
    }
  });

  it('logs what changes the archive and every refusal, never a successful read', async () => {
    const db = h.herald.store.db;
    const count = async (): Promise<number> => Number((await db.selectFrom('archive_actions').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow()).n);
    const before = await count();
    // Reads, by both tiers, as the UI and an agent make them: nothing is written.
    for (const client of [h.bridge, h.admin]) {
      for (const via of ['ui', 'mcp', undefined]) {
        const headers = via === undefined ? {} : { 'x-herald-client': via };
        expect((await client.get('/admin/archive/scrapes', { headers })).status).toBe(200);
        expect((await client.get('/admin/archive/storage', { headers })).status).toBe(200);
        expect((await client.get('/admin/archive/media?limit=5', { headers })).status).toBe(200);
        expect((await client.get('/admin/archive/media/1', { headers })).status).toBe(404);
        expect((await client.get('/admin/archive/scrapes/0b6f3a52-5d0e-4c36-9f6f-1f2a3b4c5d6e', { headers })).status).toBe(404);
      }
    }
    expect((await h.admin.get('/admin/archive/actions?limit=5')).status).toBe(200);
    expect(await count()).toBe(before);

    // A refused read is logged; so is a refused change, and a change.
    expect((await h.bridge.get('/admin/archive/media?cursor=bm90LWEtY3Vyc29y')).status).toBe(400);
    expect((await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'download' })).status).toBe(403);
    const started = await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' }, { headers: { 'x-herald-client': 'ui' } });
    expect(started.status).toBe(201);
    const log = (await h.admin.get('/admin/archive/actions?limit=3')).json as { actions: { action: string; result: string; actor: string; via: string }[] };
    expect(log.actions).toMatchObject([
      { action: 'start_scrape:links', result: 'ok', actor: 'bridge', via: 'ui' },
      { action: 'start_scrape:download', result: 'refused', actor: 'bridge' },
      { action: 'query_media', result: 'refused', actor: 'bridge' },
    ]);
    expect(await count()).toBe(before + 3);
  });

  it("prunes action log entries older than Herald's record retention (8 days), keeps younger ones", async () => {
    const db = h.herald.store.db;
    const day = 24 * 60 * 60 * 1000;
    const entry = (daysAgo: number, target: string) => ({ at: new Date(Date.now() - daysAgo * day), actor: 'admin', via: 'http' as const, action: 'delete_scrape', target, result: 'ok' as const, detail: null });
    await db.insertInto('archive_actions').values([entry(30, 'prune-30'), entry(8.1, 'prune-8.1'), entry(7.9, 'prune-7.9'), entry(0, 'prune-0')]).execute();
    expect(await h.herald.use(archiveModule).media.pruneActions()).toBeGreaterThanOrEqual(2);
    const left = await db.selectFrom('archive_actions').select('target').where('target', 'like', 'prune-%').execute();
    expect(left.map((r) => r.target).sort()).toEqual(['prune-0', 'prune-7.9']);
  });

  it("a scrape carries its channel's name, and a scrape's refused and failed items are one query (state=refused,failed)", async () => {
    // Finish the links scrape the log test started, then download: the newest three messages carry what a download refuses.
    await waitFor(async () => ((await h.admin.get('/admin/archive/scrapes')).json as { scrapes: { state: string }[] }).scrapes.every((s) => s.state !== 'running'), 'the links scrape to end', 60_000);
    const res = await h.admin.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'download' });
    expect(res.status).toBe(201);
    const scrape = res.json as { id: string; channelId: string; channelName: string | null };
    expect(scrape).toMatchObject({ channelId: SANDBOX_MEDIA_CHANNEL, channelName: 'media' });
    const done = await waitFor(async () => {
      const s = (await h.admin.get(`/admin/archive/scrapes/${scrape.id}`)).json as { state: string; errors: number; channelName: string | null };
      return s.state === 'completed' ? s : undefined;
    }, 'the download scrape to complete', 60_000);
    expect(done.channelName).toBe('media');
    const refused = (await h.bridge.get(`/admin/archive/media?scrapeId=${scrape.id}&state=refused&limit=50`)).json as { items: { state: string; error: string | null }[] };
    expect(refused.items.map((i) => i.error).sort()).toEqual(['file larger than 1048576 bytes', 'host images.example.com is not a media host of the platform', 'redirect (302) refused']);
    // With those, any download that failed (on a loaded machine one may time out), each with its reason.
    const problems = (await h.bridge.get(`/admin/archive/media?scrapeId=${scrape.id}&state=refused,failed&limit=200`)).json as { items: { state: string; error: string | null }[] };
    expect(problems.items.length).toBeGreaterThanOrEqual(3);
    expect(problems.items.length).toBeLessThanOrEqual(done.errors);
    expect(problems.items.every((i) => (i.state === 'refused' || i.state === 'failed') && i.error !== null)).toBe(true);
    const stored = (await h.bridge.get(`/admin/archive/media?scrapeId=${scrape.id}&state=stored&limit=200`)).json as { items: { state: string }[] };
    expect(stored.items.length).toBeGreaterThan(0);
    expect(stored.items.every((i) => i.state === 'stored')).toBe(true);
    expect((await h.bridge.get('/admin/archive/media?state=lost')).status).toBe(400);
  });
});
