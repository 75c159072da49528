import { execSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SANDBOX_MEDIA_CHANNEL } from '../src/platforms/discord/sandbox/sandbox.js';
import { startTestHerald, type TestHerald } from './support/herald.js';

/** Debian's chromium (`apt-get install chromium`); CHROMIUM_PATH elsewhere. */
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
/** Kept after the run (the run's temp folder is removed): what the page looked like at the end. */
const SCREENSHOTS = path.resolve('test-results');

/** The page's globals a test reads (the test's tsconfig has no DOM types). */
type Web = { sessionStorage: { length: number; setItem(key: string, value: string): void } };

/** Poll the page patiently: a loaded CI machine renders slowly. */
const poll = <T>(fn: () => T | Promise<T>, options: { timeout?: number } = {}) => expect.poll(fn, { timeout: 30_000, interval: 100, ...options });

if (!haveChromium) console.warn(`archive UI test skipped: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)`);

describe.skipIf(!haveChromium)('media archive web UI in a real browser', { timeout: 180_000 }, () => {
  let h: TestHerald;
  let browser: Browser;
  let page: Page;
  const apiCalls: string[] = [];
  /** Every request a page of this test made anywhere but Herald (an archived item's own URL, above all). */
  const elsewhere: string[] = [];
  /** Anything the page's strict CSP (default-src 'none') blocked: the page must need nothing it forbids. */
  const violations: string[] = [];
  const watch = (p: Page): void => {
    p.on('request', (r) => {
      const u = r.url();
      if (!u.startsWith(`${h.url}/`) && !u.startsWith('blob:') && !u.startsWith('data:')) elsewhere.push(u);
    });
    p.on('console', (m) => {
      if (m.type() === 'error' && /Content Security Policy/.test(m.text())) violations.push(m.text());
    });
  };

  beforeAll(async () => {
    // The page's bundle, built as `npm run build` builds it.
    execSync('npm run -s build:web', { stdio: 'inherit' });
    h = await startTestHerald({
      sandbox: { mediaMessages: 1_000 },
      env: { HERALD_MEDIA_LIMIT_BYTES: '700000', HERALD_MEDIA_WARN_PERCENT: '50', HERALD_MEDIA_OVERRUN_PERCENT: '90', HERALD_MEDIA_MAX_FILE_BYTES: '1048576' },
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
    watch(page);
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith('/admin/archive/')) apiCalls.push(`${r.method()} ${u.pathname}`);
    });
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('runs the archive from the page: token, live progress, confirm step, grid with filters, delete, action log', async () => {
    // What the page showed when a step failed: its filter fields, the grid's items and any warning.
    onTestFailed(async () => {
      const shown = await page
        .evaluate(() => {
          type El = { getAttribute(n: string): string | null; value?: string; textContent: string | null };
          const doc = (globalThis as unknown as { document: { querySelectorAll(s: string): El[] } }).document;
          const fields = doc.querySelectorAll('[data-testid^=filter-]').map((e) => `${e.getAttribute('data-testid') ?? ''}=${e.value ?? ''}`);
          const items = doc.querySelectorAll('[data-testid=media-item]').map((e) => `${e.getAttribute('data-kind') ?? ''}/${e.getAttribute('data-state') ?? ''}`);
          const warnings = doc.querySelectorAll('.warning').map((e) => e.textContent ?? '');
          return { fields, items: items.length, kinds: [...new Set(items)], warnings };
        })
        .catch((err: unknown) => String(err));
      console.log(`archive page when the test failed: ${JSON.stringify(shown)}\nadmin API calls: ${apiCalls.slice(-20).join(', ')}`);
    });
    await page.goto(`${h.url}/ui/archive`);
    await page.getByTestId('token').fill(h.adminToken);
    await page.getByTestId('token-save').click();
    await poll(() => page.getByTestId('live').textContent()).toBe('live');

    // A download scrape, followed live: the page does not poll.
    await page.getByTestId('start-channel').fill(SANDBOX_MEDIA_CHANNEL);
    await page.getByTestId('start-mode').selectOption('download');
    await page.getByTestId('start').click();
    await poll(() => page.getByTestId('start-message').textContent()).toMatch(/^Started scrape /);
    const row = page.locator('[data-testid=scrape][data-state=completed]');
    await row.first().waitFor({ timeout: 45_000 }).catch(async (err: unknown) => {
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SCREENSHOTS, 'archive-ui-failed.png'), fullPage: true });
      console.log(JSON.stringify((await h.admin.get('/admin/archive/scrapes')).json), apiCalls);
      throw err;
    });
    expect(await row.first().getByTestId('messages').textContent()).toBe('1000');
    const listed = apiCalls.filter((c) => c === 'GET /admin/archive/scrapes').length;
    expect(listed).toBeLessThanOrEqual(2);
    await poll(() => page.getByTestId('storage').getAttribute('data-level')).toBe('warning');

    // The grid followed the scrape by itself (it was empty when the page opened), and says whose and where, by name.
    await poll(() => page.locator('[data-testid=media-item]').count()).toBeGreaterThanOrEqual(60);
    const channel = row.first().getByTestId('channel');
    expect(await channel.textContent()).toBe('#media');
    expect(await channel.getAttribute('title')).toBe(SANDBOX_MEDIA_CHANNEL);
    const author = page.locator('[data-testid=media-item]').first().getByTestId('author');
    expect(await author.textContent()).toMatch(/^(Roshne|Morgan|Ada)$/);
    expect(await author.getAttribute('title')).toMatch(/^[0-9]{17,20}$/);
    expect(await page.locator('[data-testid=media-item]').first().getByTestId('channel').textContent()).toBe('#media');

    // What the download refused is a placeholder with the reason and the URL as text; the browser never fetched it.
    const refused = page.locator('[data-testid=media-item][data-state=refused]');
    await poll(() => refused.count()).toBe(3);
    const reasons = (await refused.getByTestId('reason').allTextContents()).sort();
    expect(reasons).toEqual(['refused: file larger than 1048576 bytes', 'refused: host images.example.com is not a media host of the platform', 'refused: redirect (302) refused']);
    expect(await refused.getByTestId('url').allTextContents()).toEqual(expect.arrayContaining(['https://images.example.com/picture.png', `${h.sandbox.url}/media-redirect/img-1.png`]));
    expect(await refused.locator('img, a[href*="images.example.com"], a[href*="media-redirect"]').count()).toBe(0);
    await poll(() => page.locator('[data-testid=media-item][data-state=stored] img').count()).toBeGreaterThan(5);
    expect((await page.locator('[data-testid=media-grid] img').evaluateAll((els) => els.map((e) => e.getAttribute('src') ?? ''))).every((src) => src.startsWith('blob:'))).toBe(true);

    // The Errors count opens the list of what went wrong, each with its reason (the three refusals;
    // on a loaded machine some downloads also time out, and are listed as failed).
    const failedItems = ((await h.admin.get(`/admin/archive/media?scrapeId=${(await row.first().getAttribute('data-id')) ?? ''}&state=refused,failed&limit=50`)).json as { items: unknown[] }).items.length;
    await row.first().getByTestId('errors').click();
    const errors = page.getByTestId('error-list');
    await poll(() => errors.getByTestId('error-item').count()).toBe(failedItems);
    expect(await errors.locator('[data-testid=error-item][data-state=refused]').count()).toBe(3);
    expect(await errors.textContent()).toContain('refused: redirect (302) refused');
    expect(await errors.textContent()).toContain('https://images.example.com/picture.png');
    await errors.getByTestId('error-list-close').click();
    await poll(() => page.getByTestId('error-list').count()).toBe(0);

    // Past the warning level, a new scrape asks first.
    await page.getByTestId('start-mode').selectOption('links');
    await page.getByTestId('start').click();
    await page.getByTestId('confirm-box').waitFor();
    expect(await page.getByTestId('confirm-box').textContent()).toContain('repeat with confirm true');
    await page.getByTestId('confirm-start').click();
    await poll(() => page.getByTestId('start-message').textContent()).toMatch(/^Started scrape /);
    await poll(() => page.locator('[data-testid=scrape][data-state=completed]').count(), { timeout: 45_000 }).toBe(2);
    // Links mode stores nothing: every item of that scrape is a placeholder, and no URL of it was fetched.
    const links = page.locator('[data-testid=scrape]').filter({ hasText: 'links' });
    await links.getByRole('button', { name: 'Media' }).click();
    await poll(() => page.locator('[data-testid=media-item][data-state=linked]').count()).toBeGreaterThan(30);
    expect(await page.locator('[data-testid=media-item][data-state=linked] img').count()).toBe(0);
    expect(await page.locator('[data-testid=media-item][data-state=linked]').first().getByTestId('reason').textContent()).toBe('not downloaded (links mode)');
    await page.getByTestId('filter-scrapeId').fill('');

    // The grid, filtered; thumbnails of stored images come through the admin file route.
    await page.getByTestId('filter-kind').selectOption('video');
    await page.getByTestId('filter-apply').click();
    await poll(async () => new Set(await page.locator('[data-testid=media-item]').evaluateAll((els) => els.map((e) => e.getAttribute('data-kind')))).size === 1 && (await page.locator('[data-testid=media-item][data-kind=video]').count()) > 0).toBe(true);
    // A select, typing and the submit before the page renders again (a quick operator, a loaded
    // machine): each builds on the one before, so the filter is kind image and text harbour.
    await page.evaluate(() => {
      type Field = { value: string; dispatchEvent(e: unknown): boolean; click(): void };
      const web = globalThis as unknown as { document: { querySelector(s: string): Field }; Event: new (type: string, init: { bubbles: boolean }) => unknown };
      const set = (id: string, value: string, event: string) => {
        const field = web.document.querySelector(`[data-testid=${id}]`);
        field.value = value;
        field.dispatchEvent(new web.Event(event, { bubbles: true }));
      };
      set('filter-kind', 'image', 'change');
      set('filter-text', 'harbour', 'input');
      web.document.querySelector('[data-testid=filter-apply]').click();
    });
    await poll(() => page.locator('[data-testid=media-item][data-kind=image] img').count()).toBeGreaterThan(5);
    await poll(() => page.locator('[data-testid=media-item] img').first().evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBe(16);
    const texts = await page.locator('[data-testid=media-item] figcaption').allTextContents();
    expect(texts.every((t) => t.includes('image'))).toBe(true);
    await page.getByTestId('media-more').click();
    await poll(() => page.locator('[data-testid=media-item]').count()).toBeGreaterThan(60);

    // Delete needs a second click; then the row and its bytes are gone.
    const download = page.locator('[data-testid=scrape]').filter({ hasText: 'download' });
    await download.getByTestId('delete').click();
    await download.getByTestId('delete-confirm').click();
    await poll(() => page.locator('[data-testid=scrape]').count()).toBe(1);
    await poll(() => page.getByTestId('storage').getAttribute('data-level')).toBe('ok');

    // The action log shows what the page changed, not what it read.
    await poll(async () => page.locator('[data-testid=action][data-action=delete_scrape][data-result=ok]').count()).toBeGreaterThan(0);
    expect(await page.locator('[data-testid=actions]').textContent()).toContain('start_scrape:download');
    expect(await page.locator('[data-testid=action]').evaluateAll((els) => els.map((e) => e.getAttribute('data-action')))).toEqual(
      expect.not.arrayContaining(['list_scrapes', 'get_storage', 'query_media', 'get_scrape', 'get_media_item']),
    );
    expect(await page.locator('[data-testid=action][data-action="start_scrape:download"]').first().getByTestId('channel').textContent()).toBe('#media');

    // Nothing but Herald was asked for anything, and the page needed nothing its CSP forbids.
    expect(elsewhere).toEqual([]);
    expect(violations).toEqual([]);
    expect(await page.locator('link[rel=icon]').getAttribute('href')).toBe('/ui/archive/favicon.svg');

    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.getByTestId('filter-text').fill('');
    await page.getByTestId('filter-apply').click();
    await page.screenshot({ path: path.join(SCREENSHOTS, 'archive-ui.png'), fullPage: true });
  });

  it('says so when a token is refused (a wrong one, or the bridge token), and keeps none', async () => {
    const other = await browser.newPage();
    watch(other);
    await other.goto(`${h.url}/ui/archive`);
    for (const wrong of ['not-the-token', h.bridgeToken]) {
      await other.getByTestId('token').fill(wrong);
      await other.getByTestId('token-save').click();
      await poll(() => other.getByTestId('token-error').textContent()).toContain('That token was refused');
      expect(await other.getByTestId('token').inputValue()).toBe(wrong);
      expect(await other.evaluate(() => (globalThis as unknown as Web).sessionStorage.length)).toBe(0);
      expect(await other.getByTestId('live').count()).toBe(0);
    }
    // The right one opens the page.
    await other.getByTestId('token').fill(h.adminToken);
    await other.getByTestId('token-save').click();
    await poll(() => other.getByTestId('live').textContent()).toBe('live');
    await other.close();
    expect(elsewhere).toEqual([]);
  });

  it('keeps the token across a reload in the tab, and Sign out forgets it', async () => {
    const other = await browser.newPage();
    await other.goto(`${h.url}/ui/archive`);
    await other.getByTestId('token').fill(h.adminToken);
    await other.getByTestId('token-save').click();
    await poll(() => other.getByTestId('live').textContent()).toBe('live');
    await other.reload();
    await poll(() => other.getByTestId('live').textContent()).toBe('live');
    expect(await other.getByTestId('token').count()).toBe(0);
    await other.getByTestId('sign-out').click();
    await other.getByTestId('token').waitFor();
    expect(await other.getByTestId('token-notice').textContent()).toContain('Signed out');
    expect(await other.evaluate(() => (globalThis as unknown as Web).sessionStorage.length)).toBe(0);
    await other.reload();
    await other.getByTestId('token').waitFor();
    expect(await other.getByTestId('live').count()).toBe(0);

    // A token kept in the tab that is refused later (the admin token changed) asks again, saying why.
    await other.evaluate(() => (globalThis as unknown as Web).sessionStorage.setItem('herald-admin-token', 'an-old-token'));
    await other.reload();
    await poll(() => other.getByTestId('token-notice').textContent()).toContain('refused');
    expect(await other.evaluate(() => (globalThis as unknown as Web).sessionStorage.length)).toBe(0);
    await other.close();
  });
});
