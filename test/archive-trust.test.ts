import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blobRelativePath } from '../src/modules/archive/media.js';
import { startTestHerald, type TestHerald } from './support/herald.js';

/** A CSP header as directive → its sources. */
function csp(header: string | null): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const part of (header ?? '').split(';')) {
    const [name, ...sources] = part.trim().split(/\s+/);
    if (name !== undefined && name !== '') out.set(name, sources);
  }
  return out;
}

/**
 * What the archive lets a browser do (issue 19): the operator's browser fetches only what Herald
 * stored, and a stored file never runs as a page of Herald's origin.
 */
describe('the media archive: what browsers are told', { timeout: 120_000 }, () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ sandbox: { mediaMessages: 0 } });
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
      mkdirSync(path.dirname(path.join(h.herald.media.mediaDir, rel)), { recursive: true });
      writeFileSync(path.join(h.herald.media.mediaDir, rel), type === 'image/svg+xml' ? '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>' : 'bytes');
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
});
