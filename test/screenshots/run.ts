import { execSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Page } from 'playwright-core';
import { announceEstimate, scriptArgs } from '../support/script-args.js';

/**
 * `npm run screenshots [-- --out DIR --no-build]`: the pictures the guides show. Builds Herald
 * (`npm run build`, unless `--no-build`), starts it in sandbox mode on free ports with a data
 * folder of its own, gives it something to show (the README's first delivery and a few more posts,
 * a download scrape of the sandbox's #media channel), opens the status page (`/` on the metrics
 * port) and the archive UI (`/ui/archive`) in Chromium through playwright-core, and writes
 * `status-page.png` and `archive-ui.png` into docs/images/. Chromium: Debian's
 * (`apt-get install chromium`), or CHROMIUM_PATH. Exit 0: both written; 1: something failed.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const GUILD = '234567890123456789';
const ALERTS = '345678901234567890';
const MEDIA = '345678901234567895';

const USAGE = `usage: npm run screenshots [-- --out DIR] [--no-build] [--dry-run]

Photographs the status page and the archive UI for the guides; it takes about 2 minutes (1 with --no-build).

  --out DIR    where the PNGs go (docs/images)
  --no-build   use dist/ as it is instead of running npm run build first
  --dry-run    print how long it will take and start nothing
  --help       this text`;
const args = scriptArgs('npm run screenshots', USAGE, { out: { type: 'string' }, 'no-build': { type: 'boolean' } });
announceEstimate(args['no-build'] === true ? 'about 1 min (Herald and two pages ~1 min)' : 'about 2 min (npm run build ~1 min, Herald and two pages ~1 min)');
const out = path.resolve(args.out ?? path.join(ROOT, 'docs/images'));

async function main(): Promise<void> {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)`);
  if (args['no-build'] !== true) execSync('npm run -s build', { cwd: ROOT, stdio: 'inherit' });
  const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-screenshots-'));
  // Only what a newcomer's shell would hold: none of Herald's own variables from this one.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(HERALD_|DISCORD_|MCP_|SLACK_|PORT$|HOST$|DATABASE_URL$)/.test(name)));
  const herald = spawn(process.execPath, [path.join(ROOT, 'bin/herald.js'), 'serve'], {
    cwd: ROOT,
    env: { ...env, PORT: '0', HERALD_SANDBOX_PORT: '0', HERALD_DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => herald.once('exit', (code) => resolve(code)));
  try {
    // The banner's export lines are where everything is, as a newcomer reads them.
    const places = await new Promise<Record<string, string>>((resolve, reject) => {
      let text = '';
      herald.stdout.on('data', (d: Buffer) => {
        text += d.toString();
        if (text.includes('\nTry it:')) resolve(Object.fromEntries([...text.matchAll(/^ {2}export ([A-Z_]+)=(\S+)$/gm)].map((m) => [m[1] ?? '', m[2] ?? ''])));
      });
      void exited.then((code) => reject(new Error(`herald serve exited (${code}) before printing its banner`)));
    });
    const api = need(places, 'HERALD_URL');
    const metrics = need(places, 'METRICS_URL');
    const admin = need(places, 'HERALD_ADMIN_TOKEN');
    const bridge = need(places, 'MCP_BRIDGE_TOKEN');
    await seed(api, admin, bridge);
    // The status page samples every 10 s: two samples draw a line.
    await new Promise((r) => setTimeout(r, 21_000));
    await mkdir(out, { recursive: true });
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await page.goto(`${metrics}/?refresh=off`);
      await shoot(page, 'status-page.png');
      await page.goto(`${api}/ui/archive`);
      await page.getByTestId('token').fill(admin);
      await page.getByTestId('token-save').click();
      await page.getByTestId('live').filter({ hasText: /^live$/ }).waitFor({ timeout: 30_000 });
      // Thumbnails of stored files, once the grid has them.
      await page.locator('[data-testid=media-grid] img').first().waitFor({ timeout: 30_000 }).catch(() => undefined);
      await page.waitForLoadState('networkidle');
      await shoot(page, 'archive-ui.png');
    } finally {
      await browser.close();
    }
  } finally {
    herald.kill('SIGTERM');
    await exited;
    await rm(dataDir, { recursive: true, force: true });
  }
}

function need(places: Record<string, string>, name: string): string {
  const value = places[name];
  if (value === undefined) throw new Error(`the banner printed no export ${name}`);
  return value;
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(out, name), fullPage: true });
  console.log(`wrote ${path.relative(process.cwd(), path.join(out, name))}`);
}

/** The README's first delivery and a few more posts, and a download scrape of #media, stopped after its first items. */
async function seed(api: string, admin: string, bridge: string): Promise<void> {
  const call = async (token: string, method: string, route: string, body?: unknown): Promise<Record<string, unknown>> => {
    const res = await fetch(`${api}${route}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    if (res.status >= 400) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, unknown>;
  };
  await call(admin, 'PUT', `/admin/destinations/${GUILD}/alerts`, { channel_id: ALERTS });
  for (let i = 0; i < 12; i++) {
    await call(bridge, 'POST', '/mcp/deliveries', { request_id: `5c${i.toString(16).padStart(2, '0')}`.padEnd(64, '0'), kind: 'post', target: { guild_id: GUILD, destination: 'alerts' }, body: { content: `Screenshot post ${i + 1}` } });
  }
  const scrape = await call(admin, 'POST', '/admin/archive/scrapes', { channelId: MEDIA, mode: 'download' });
  const id = String(scrape['id']);
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const s = await call(admin, 'GET', `/admin/archive/scrapes/${id}`);
    if (Number(s['itemsFound'] ?? 0) >= 60 || s['state'] !== 'running') break;
    await new Promise((r) => setTimeout(r, 500));
  }
  await call(admin, 'POST', `/admin/archive/scrapes/${id}/stop`).catch(() => undefined);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`screenshots: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
