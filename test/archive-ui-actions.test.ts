import { execSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox, SANDBOX_MEDIA_CHANNEL, SANDBOX_MEMBER_IDS } from '../src/platforms/discord/sandbox/sandbox.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { IDS, newToken, startTestHerald, type TestHerald } from './support/herald.js';
import { freePort } from './support/ports.js';

/**
 * The archive page's actions in a real browser, against a Herald and its sandbox: Stop, a scrape's
 * own Media, the source, channel, author and date filters, the error list, Sign out, and the live
 * event stream coming back after Herald restarts.
 */

/** Debian's chromium (`apt-get install chromium`); CHROMIUM_PATH elsewhere. */
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
const SCREENSHOTS = path.resolve('test-results');
/** Messages of the sandbox's media channel: one a minute from 2025-01-01T00:00Z, the newest (index 599) at 09:59. */
const MESSAGES = 600;
/** The Discord epoch, to read a message id's time. */
const DISCORD_EPOCH = 1_420_070_400_000n;
const postedAt = (messageId: string) => new Date(Number((BigInt(messageId) >> 22n) + DISCORD_EPOCH));

type Web = { sessionStorage: { length: number } };
const poll = <T>(fn: () => T | Promise<T>, options: { timeout?: number } = {}) => expect.poll(fn, { timeout: 30_000, interval: 100, ...options });

if (!haveChromium) console.warn(`archive UI actions test skipped: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)`);

describe.skipIf(!haveChromium)('media archive web UI: actions', { timeout: 180_000 }, () => {
  let sandbox: DiscordSandbox;
  let db: TestDatabase;
  let h: TestHerald;
  let browser: Browser;
  let page: Page;
  /** One Herald after another on one URL, store, sandbox and tokens: a restart the page sees as a dropped stream. */
  let env: Record<string, string>;
  let running = false;
  const start = async () => {
    h = await startTestHerald({ useSandbox: sandbox, useDb: db, env });
    running = true;
  };
  const stop = async () => {
    running = false;
    await h.close();
  };

  beforeAll(async () => {
    execSync('npm run -s build:web', { stdio: 'inherit' });
    sandbox = await new DiscordSandbox({ mediaMessages: MESSAGES }).start();
    db = await testDatabase();
    env = {
      PORT: String(await freePort()),
      HERALD_ADMIN_TOKEN: newToken(),
      MCP_BRIDGE_TOKEN: newToken(),
      HERALD_MEDIA_MAX_FILE_BYTES: '1048576',
    };
    await start();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
  }, 180_000);
  afterAll(async () => {
    if (page !== undefined && !page.isClosed()) {
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SCREENSHOTS, 'archive-ui-actions.png'), fullPage: true }).catch(() => undefined);
    }
    // Each step even when one before it failed (a test that timed out mid-restart left h closed).
    sandbox?.clearFaults();
    await browser?.close().catch(() => undefined);
    if (running) await h?.close().catch(() => undefined);
    await sandbox?.close();
    await db?.drop();
  });

  const items = () => page.locator('[data-testid=media-item]');
  /** Set every filter field (those not named to empty) and apply: no field keeps an earlier value. */
  const applyFilters = async (set: Record<string, string>) => {
    for (const name of ['kind', 'source']) await page.getByTestId(`filter-${name}`).selectOption(set[name] ?? '');
    for (const name of ['scrapeId', 'channelId', 'guildId', 'author', 'after', 'before', 'text']) await page.getByTestId(`filter-${name}`).fill(set[name] ?? '');
    await page.getByTestId('filter-apply').click();
  };
  /** What the grid shows once it has settled on a filter: the expected count from the API for the same query. */
  const apiCount = async (query: Record<string, string>) =>
    ((await h.admin.get(`/admin/archive/media?${new URLSearchParams({ ...query, limit: '200' }).toString()}`)).json as { items: unknown[] }).items.length;

  it('signs in, stops a running scrape, lists its errors, and shows one scrape\'s media', async () => {
    await page.goto(`${h.url}/ui/archive`);
    await page.getByTestId('token').fill(h.adminToken);
    await page.getByTestId('token-save').click();
    await poll(() => page.getByTestId('live').textContent()).toBe('live');

    // Discord answers every page of history after the first slowly: the scrape is still running
    // when the page stops it. The first page (the newest 100 messages) holds the three refusals.
    sandbox.inject({ method: 'GET', path: `^/channels/${SANDBOX_MEDIA_CHANNEL}/messages$`, action: 'delay', ms: 0, times: 1 });
    sandbox.inject({ method: 'GET', path: `^/channels/${SANDBOX_MEDIA_CHANNEL}/messages$`, action: 'delay', ms: 5_000, times: 1_000 });
    await page.getByTestId('start-channel').fill(SANDBOX_MEDIA_CHANNEL);
    await page.getByTestId('start-mode').selectOption('download');
    await page.getByTestId('start').click();
    const media = page.locator('[data-testid=scrape]').filter({ hasText: '#media' });
    await poll(() => media.getAttribute('data-state')).toBe('running');
    const scrapeId = (await media.getAttribute('data-id')) ?? '';
    expect(scrapeId).toMatch(/^[0-9a-f-]{36}$/);
    await poll(() => media.getByTestId('errors').textContent(), { timeout: 45_000 }).toBe('3');

    // Stop: the row says stopped, offers no Stop any more, and the action log has it.
    await media.getByTestId('stop').click();
    await poll(() => media.getAttribute('data-state')).toBe('stopped');
    expect(await media.getByTestId('stop').count()).toBe(0);
    expect(((await h.admin.get(`/admin/archive/scrapes/${scrapeId}`)).json as { state: string }).state).toBe('stopped');
    await poll(() => page.locator('[data-testid=action][data-action=stop_scrape][data-result=ok]').count()).toBe(1);
    sandbox.clearFaults();

    // The error list: the three refusals, each with its reason and URL, and nothing fetched from them.
    await media.getByTestId('errors').click();
    const errors = page.getByTestId('error-list');
    await poll(() => errors.getByTestId('error-item').count()).toBe(3);
    expect(await errors.locator('[data-testid=error-item][data-state=refused]').count()).toBe(3);
    const text = (await errors.textContent()) ?? '';
    for (const reason of ['refused: file larger than 1048576 bytes', 'refused: redirect (302) refused', 'refused: host images.example.com is not a media host of the platform']) expect(text).toContain(reason);
    expect(text).toContain('https://images.example.com/picture.png');
    expect(text).toContain('Errors of the scrape of #media (3)');
    await errors.getByTestId('error-list-close').click();
    await poll(() => page.getByTestId('error-list').count()).toBe(0);

    // A second scrape, of another channel (a message there links a picture): each row's Media
    // shows that scrape's items only.
    sandbox.writeAsUser(SANDBOX_MEMBER_IDS.manager, IDS.channels.alerts, `look: ${sandbox.url}/media/img-7.png`);
    await page.getByTestId('start-channel').fill(IDS.channels.alerts);
    await page.getByTestId('start-mode').selectOption('links');
    await page.getByTestId('start').click();
    const alerts = page.locator('[data-testid=scrape]').filter({ hasText: '#alerts' });
    // Its row ends completed: a list read before the scrape finished, answered after its live event,
    // does not put it back to running (it did, on PostgreSQL). Its Media fills as the scrape records.
    await poll(() => alerts.getAttribute('data-state'), { timeout: 20_000 }).toBe('completed');
    await alerts.getByRole('button', { name: 'Media' }).click();
    const alertsId = (await alerts.getAttribute('data-id')) ?? '';
    await poll(() => page.getByTestId('filter-scrapeId').inputValue()).toBe(alertsId);
    await poll(() => items().count()).toBe(1);
    expect(await items().first().getByTestId('channel').textContent()).toBe('#alerts');
    expect(await items().first().getAttribute('data-state')).toBe('linked');
    await media.getByRole('button', { name: 'Media' }).click();
    await poll(() => page.getByTestId('filter-scrapeId').inputValue()).toBe(scrapeId);
    await poll(async () => (await items().count()) > 1 && (await items().getByTestId('channel').allTextContents()).every((c) => c === '#media')).toBe(true);
  });

  it('filters the grid by source, channel, author and date', async () => {
    // Source: every item shown is of that source, and there are as many as the API has.
    await applyFilters({ source: 'embed' });
    // The grid's first page holds 60. The grid shows its query's answer when it was asked, and the
    // archive may still grow (download steps the first test's stop did not interrupt): asked again
    // until grid and API agree.
    let embeds = 0;
    await poll(async () => {
      embeds = await apiCount({ source: 'embed' });
      if ((await items().count()) === Math.min(embeds, 60)) return true;
      await page.getByTestId('filter-apply').click();
      return false;
    }).toBe(true);
    expect(embeds).toBeGreaterThan(0);
    expect((await page.locator('[data-testid=media-item] figcaption').allTextContents()).every((t) => t.includes(' · embed · '))).toBe(true);

    // Channel: the other channel's one item; the media channel's many.
    await applyFilters({ channelId: IDS.channels.alerts });
    await poll(() => items().count()).toBe(1);
    expect(await items().first().getByTestId('channel').getAttribute('title')).toBe(IDS.channels.alerts);
    await applyFilters({ channelId: SANDBOX_MEDIA_CHANNEL });
    await poll(async () => (await items().count()) > 1 && (await items().getByTestId('channel').allTextContents()).every((c) => c === '#media')).toBe(true);

    // Author: only Ada's items (the media channel's authors take turns).
    await applyFilters({ author: SANDBOX_MEMBER_IDS.owner });
    await poll(async () => (await items().count()) > 0 && (await items().getByTestId('author').evaluateAll((els) => els.map((e) => e.getAttribute('title')))).every((a) => a === SANDBOX_MEMBER_IDS.owner)).toBe(true);
    expect(await items().first().getByTestId('author').textContent()).toBe('Ada');

    // Date: items of messages posted from 09:40 to 09:50 only (one message a minute; newest 09:59).
    await applyFilters({ channelId: SANDBOX_MEDIA_CHANNEL, after: '2025-01-01T09:40:00Z', before: '2025-01-01T09:50:00Z' });
    const window = await apiCount({ channelId: SANDBOX_MEDIA_CHANNEL, after: '2025-01-01T09:40:00Z', before: '2025-01-01T09:50:00Z' });
    expect(window).toBeGreaterThan(0);
    await poll(() => items().count()).toBe(window);
    const times = (await page.locator('[data-testid=media-item] figcaption a').evaluateAll((els) => els.map((e) => e.getAttribute('href') ?? ''))).map((href) => postedAt(href.split('/').pop() ?? '0').toISOString());
    expect(times.length).toBe(window);
    for (const t of times) expect(t >= '2025-01-01T09:40:00.000Z' && t < '2025-01-01T09:50:00.000Z', t).toBe(true);
    expect(await page.locator('[data-testid=media-item] figcaption a').first().textContent()).toMatch(/^2025-01-01 09:[45][0-9]$/);
  });

  it('shows the live stream dropping while Herald restarts, and following again once it is back', async () => {
    await poll(() => page.getByTestId('live').textContent()).toBe('live');
    await stop();
    await poll(() => page.getByTestId('live').textContent()).toBe('connecting…');
    await start();
    await poll(() => page.getByTestId('live').textContent()).toBe('live');
    // The new stream carries events: a scrape started behind the page's back appears without a reload.
    const started = await h.admin.post('/admin/archive/scrapes', { channelId: IDS.channels.deals, mode: 'links' });
    expect(started.status, started.text).toBeLessThan(300);
    await poll(() => page.locator('[data-testid=scrape]').filter({ hasText: '#deals' }).count()).toBe(1);
  });

  it('signs out: the token is forgotten, the panels and the live stream close', async () => {
    const aborted: string[] = [];
    page.on('requestfailed', (r) => {
      if (new URL(r.url()).pathname === '/admin/archive/events') aborted.push(r.failure()?.errorText ?? '');
    });
    await poll(() => page.getByTestId('live').textContent()).toBe('live');
    await page.getByTestId('sign-out').click();
    await page.getByTestId('token').waitFor();
    expect(await page.getByTestId('token-notice').textContent()).toContain('Signed out');
    expect(await page.evaluate(() => (globalThis as unknown as Web).sessionStorage.length)).toBe(0);
    expect(await page.getByTestId('scrapes').count()).toBe(0);
    expect(await page.getByTestId('media-grid').count()).toBe(0);
    // The page let go of its event stream.
    await poll(() => aborted.length).toBe(1);
  });
});
