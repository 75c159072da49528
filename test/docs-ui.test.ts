import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csp } from './support/csp.js';
import { startTestHerald, type TestHerald } from './support/herald.js';

/** Debian's chromium (`apt-get install chromium`); CHROMIUM_PATH elsewhere. */
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
const poll = <T>(fn: () => T | Promise<T>, options: { timeout?: number } = {}) => expect.poll(fn, { timeout: 60_000, interval: 100, ...options });

if (!haveChromium) console.warn(`/docs browser test skipped: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)`);


let h: TestHerald;
beforeAll(async () => {
  h = await startTestHerald({ sandbox: { mediaMessages: 0 } });
}, 180_000);
afterAll(async () => h?.close());

describe('/docs headers', () => {
  it('forbid framing and every other origin, send no Referer, and tell Swagger UI to keep no token', async () => {
    for (const p of ['/docs', '/docs/init.js', '/docs/swagger-ui-bundle.js', '/openapi.yaml']) {
      const res = await fetch(`${h.url}${p}`);
      expect(res.status, p).toBe(200);
      await res.arrayBuffer();
      const policy = csp(res.headers.get('content-security-policy'));
      expect(policy.get('frame-ancestors'), p).toEqual(["'none'"]);
      for (const [directive, sources] of policy) {
        expect(sources.every((s) => ["'self'", "'none'", 'data:'].includes(s) || /^'sha256-[A-Za-z0-9+/]+=*'$/.test(s)), `${p} ${directive}: ${sources.join(' ')}`).toBe(true);
      }
      expect(res.headers.get('referrer-policy'), p).toBe('no-referrer');
    }
    const init = await (await fetch(`${h.url}/docs/init.js`)).text();
    expect(init).toMatch(/persistAuthorization:\s*false/);
    expect(init).not.toMatch(/persistAuthorization:\s*true/);
  });
});

/**
 * /docs in a real browser under its CSP (issue 19): Swagger UI from the swagger-ui-dist package
 * still works offline (every request to this server, no policy violation, "Try it out" answers),
 * and a token typed into Authorize is never written to storage, where any script of this origin
 * (an archived SVG opened in a tab, once) could read it.
 */
describe.skipIf(!haveChromium)('Swagger UI at /docs in a real browser', { timeout: 180_000 }, () => {
  let browser: Browser;
  let page: Page;
  const elsewhere: string[] = [];
  const violations: string[] = [];

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    page = await browser.newPage();
    page.on('request', (r) => {
      if (!r.url().startsWith(`${h.url}/`) && !r.url().startsWith('data:')) elsewhere.push(r.url());
    });
    page.on('console', (m) => {
      if (m.type() === 'error' && /Content Security Policy/.test(m.text())) violations.push(m.text());
    });
  }, 180_000);
  afterAll(async () => browser?.close());

  /** Everything the page keeps in localStorage and sessionStorage (the test's tsconfig has no DOM types). */
  const storedText = (): Promise<string> =>
    page.evaluate(() => {
      const w = globalThis as unknown as { localStorage: object; sessionStorage: object };
      return JSON.stringify({ local: { ...w.localStorage }, session: { ...w.sessionStorage } });
    });

  it('works offline under its CSP, and keeps no token it was given', async () => {
    await page.goto(`${h.url}/docs`);
    await poll(() => page.locator('.opblock').count()).toBeGreaterThan(10);

    // Authorize with the admin token, then try an admin operation from the page.
    await page.locator('.auth-wrapper button.authorize').click();
    const admin = page.locator('.auth-container').filter({ hasText: 'adminToken' });
    await admin.locator('input').fill(h.adminToken);
    await admin.locator('button[type=submit]').click();
    await page.locator('.auth-container button.btn-done').first().click();
    const op = page.locator('#operations-archive-getMediaStorage');
    await op.locator('.opblock-summary').click();
    await op.locator('button.try-out__btn').click();
    await op.locator('button.execute').click();
    await poll(() => op.locator('.live-responses-table tbody .response-col_status').first().textContent()).toContain('200');

    const stored = await storedText();
    expect(stored).not.toContain(h.adminToken);
    expect(stored).not.toContain('adminToken');
    expect(violations).toEqual([]);
    expect(elsewhere).toEqual([]);
  });

  it('forgets a token an earlier version let Swagger UI save', async () => {
    await page.evaluate(() => (globalThis as unknown as { localStorage: { setItem(k: string, v: string): void } }).localStorage.setItem('authorized', JSON.stringify({ adminToken: { name: 'adminToken', value: 'saved-before' } })));
    await page.reload();
    await poll(() => page.locator('.opblock').count()).toBeGreaterThan(10);
    expect(await storedText()).not.toContain('saved-before');
    expect(await page.locator('.auth-wrapper button.authorize').getAttribute('class')).toMatch(/\bunlocked\b/);
  });
});
