import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DiscordSandbox, SANDBOX_MEDIA_CHANNEL, type RateLimitRule } from '../../src/platforms/discord/sandbox/sandbox.js';
import { SCRAPE_PAGE_SIZE } from '../../src/modules/archive/scrape.jobs.js';
import { awaitStarted, runCommand, type HeraldProcess } from '../support/process.js';

/**
 * `npm run bench -- --only=scrape`: a links scrape of the sandbox's generated media channel
 * (src/platforms/discord/sandbox/media-history.ts; 20,000 messages, `--quick` 2,000), started through the admin API
 * as an operator starts one, by one `herald serve` on the bench's PostgreSQL database.
 *
 * The floor is what the sandbox's limits allow for the history route (GET /channels/{id}/messages,
 * the route the scrape reads; src/platforms/discord/sandbox/faults.ts counts it in its own bucket per route and
 * channel, beside the global one): a scrape reads floor(messages / 100) + 1 pages of 100 (the last
 * one short or empty, which is how it learns the channel's start), one at a time, so the floor is
 * pages / min(route limit per second, global limit per second). Measured twice:
 *
 * - at Discord's limits as the bench's sandbox sets them (run.ts: 5 per 5 s per route and channel,
 *   50/s global): 1 page a second, so the bucket is what the scrape waits on (target ≤ 1.2);
 * - at the sandbox's default route limit (50 per second) with the same 50/s global: 50 pages a
 *   second, so Herald's own cost per page (read, index, one transaction, next claim) shows.
 *
 * Reported for each: the scrape's time (its row's createdAt → finishedAt, Herald's clock), the
 * floor, their ratio, the 429s the sandbox answered (by scope), how the floor was derived, and
 * where a page's time went (Herald's own metrics: the mean step, and the mean request within it).
 * Then a download scrape of a smaller channel (600 messages, `--quick` 200) against its pacing floor
 * and a bare fetch and write of the same files on the same disk (downloadScrape below).
 */

/** What run.ts lends this phase: a Herald process on its database, against a sandbox of this phase's. */
export interface ScrapeHarness {
  start(sandbox: DiscordSandbox, env: Record<string, string>): Promise<ScrapeHerald>;
  /** The bench's store (the download scrape starts its own Herald on it: archive-herald.ts). */
  databaseUrl: string | undefined;
}

export interface ScrapeHerald {
  url: string;
  admin: Record<string, string>;
  /** What the process printed (its log lines). */
  output(): string;
  stop(): Promise<void>;
}

/** Discord's limits as the bench's drain sandbox sets them (run.ts). */
const DISCORD_ROUTE: RateLimitRule = { limit: 5, windowMs: 5_000 };
const DISCORD_GLOBAL: RateLimitRule = { limit: 50, windowMs: 1_000 };
/** The sandbox's default route limit (src/platforms/discord/sandbox/sandbox.ts). */
const SANDBOX_DEFAULT_ROUTE: RateLimitRule = { limit: 50, windowMs: 1_000 };

const HISTORY_PATH = `/channels/${SANDBOX_MEDIA_CHANNEL}/messages`;

interface ScrapeJson {
  id: string;
  bytes: number;
  state: string;
  messagesSeen: number;
  itemsFound: number;
  errors: number;
  lastError: string | null;
  createdAt: string;
  finishedAt: string | null;
}

export async function scrapePhase(harness: ScrapeHarness, messages: number, downloadMessages: number): Promise<Record<string, number | string>> {
  const t0 = performance.now();
  const row = {
    ...(await linksScrape(harness, messages, 'Discord limits', DISCORD_ROUTE, 1.2)),
    ...(await linksScrape(harness, messages, 'route 50/s', SANDBOX_DEFAULT_ROUTE, undefined)),
    ...(await downloadScrape(harness.databaseUrl, downloadMessages)),
  };
  const wall = Math.round((performance.now() - t0) / 100) / 10;
  console.log(`  scrape phase: ${wall} s in all (three Herald start-ups included)`);
  return { ...row, 'scrape phase wall s': wall };
}

async function linksScrape(harness: ScrapeHarness, messages: number, label: string, route: RateLimitRule, target: number | undefined): Promise<Record<string, number | string>> {
  const sandbox = await new DiscordSandbox({ routeLimit: route, globalLimit: DISCORD_GLOBAL, mediaMessages: messages }).start();
  try {
    const t0 = performance.now();
    const h = await harness.start(sandbox, {});
    const startS = (performance.now() - t0) / 1000;
    const metricsUrl = metricsUrlOf(h.output());
    const before = await readMetrics(metricsUrl);
    try {
      const pages = Math.floor(messages / SCRAPE_PAGE_SIZE) + 1;
      const routePerS = route.limit / (route.windowMs / 1000);
      const globalPerS = DISCORD_GLOBAL.limit / (DISCORD_GLOBAL.windowMs / 1000);
      const pagesPerS = Math.min(routePerS, globalPerS);
      const floor = pages / pagesPerS;
      // A client that sends each window's whole allowance at its start ends with the last window's first request.
      const windowFloor = (Math.ceil(pages / route.limit) - 1) * (route.windowMs / 1000);
      const derivation = `${pages} pages (floor(${messages} / ${SCRAPE_PAGE_SIZE}) + 1, the last one short) / min(route ${route.limit} per ${route.windowMs / 1000} s, global ${DISCORD_GLOBAL.limit} per ${DISCORD_GLOBAL.windowMs / 1000} s) = ${pages} / ${pagesPerS} per s`;
      const firstRequest = sandbox.requests.length;
      const s = await scrapeToTheEnd(h, 'links', messages, floor * 3 * 1000 + 60_000);
      const seconds = (Date.parse(s.finishedAt ?? '') - Date.parse(s.createdAt)) / 1000;
      const seen = sandbox.requests.slice(firstRequest);
      const history = seen.filter((r) => r.method === 'GET' && r.path === HISTORY_PATH);
      const answered = history.filter((r) => r.status === 200);
      const route429 = seen.filter((r) => r.status === 429 && r.scope !== 'global').length;
      const global429 = seen.filter((r) => r.status === 429 && r.scope === 'global').length;
      // Between one page's request and the next one's: Herald's time per page where no bucket held it.
      const gaps = answered.slice(1).map((r, i) => r.at - (answered[i]?.at ?? r.at)).sort((a, b) => a - b);
      const gapP50 = gaps[Math.floor(gaps.length / 2)] ?? NaN;
      const gapMin = gaps[0] ?? NaN;
      const ratio = Math.round((seconds / floor) * 1000) / 1000;
      // Where a page's time goes (Herald's own metrics): the whole step (pacer, page read, indexing,
      // the transaction) and within it the request to the sandbox; the rest of the gap is the claim.
      const after = await readMetrics(metricsUrl);
      const perStep = mean(after, before, 'herald_outbox_job_duration_seconds', 'kind="media_scrape"');
      const perGet = mean(after, before, 'herald_platform_request_duration_seconds', 'method="GET"');
      const key = `scrape links ${messages} (${label})`;
      console.log(
        `  ${key}: ${seconds.toFixed(1)} s, floor ${floor.toFixed(2)} s (${derivation}), ratio ${ratio}${target !== undefined ? ` (target ≤ ${target})` : ''}; ` +
          `${answered.length} pages answered, ${history.length - answered.length} history requests refused, 429s route ${route429} global ${global429}; ` +
          `page-to-page gap p50 ${gapP50} ms, min ${gapMin} ms; step mean ${perStep} ms of which the GET ${perGet} ms; ${s.itemsFound} items; Herald started in ${startS.toFixed(1)} s`,
      );
      return {
        [`${key} s`]: Math.round(seconds * 100) / 100,
        [`${key} floor s`]: Math.round(floor * 100) / 100,
        [`${key} ÷ floor`]: ratio,
        [`${key} floor derivation`]: derivation,
        [`${key} earliest by windows s`]: windowFloor,
        [`${key} pages`]: answered.length,
        [`${key} route 429s`]: route429,
        [`${key} global 429s`]: global429,
        [`${key} page gap p50 ms`]: gapP50,
        [`${key} step mean ms`]: perStep,
        [`${key} GET mean ms`]: perGet,
        [`${key} items`]: s.itemsFound,
      };
    } finally {
      await h.stop();
    }
  } finally {
    await sandbox.close();
  }
}

/** The metrics URL from a Herald's start-up line. */
function metricsUrlOf(output: string): string | undefined {
  const line = output.split('\n').find((l) => l.includes('"msg":"herald started"'));
  if (line === undefined) return undefined;
  return (JSON.parse(line) as { metrics?: string }).metrics;
}

/** Every sample of a Prometheus text page, by its name and labels. */
async function readMetrics(url: string | undefined): Promise<Map<string, number>> {
  const samples = new Map<string, number>();
  if (url === undefined) return samples;
  const text = await (await fetch(`${url}/metrics`)).text();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line === '') continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

/** A histogram's mean in ms between two readings, over the series whose labels contain `label`. */
function mean(after: Map<string, number>, before: Map<string, number>, name: string, label: string): number {
  const total = (m: Map<string, number>, suffix: string): number => {
    let n = 0;
    for (const [k, v] of m) if (k.startsWith(`${name}_${suffix}{`) && k.includes(label)) n += v;
    return n;
  };
  const count = total(after, 'count') - total(before, 'count');
  return count === 0 ? NaN : Math.round(((total(after, 'sum') - total(before, 'sum')) / count) * 1000 * 10) / 10;
}

/** Start a scrape of the media channel through the admin API and wait for it to complete (all its messages read). */
async function scrapeToTheEnd(h: { url: string; admin: Record<string, string> }, mode: 'links' | 'download', messages: number, timeoutMs: number): Promise<ScrapeJson> {
  const res = await fetch(`${h.url}/admin/archive/scrapes`, { method: 'POST', headers: { 'content-type': 'application/json', ...h.admin }, body: JSON.stringify({ channelId: SANDBOX_MEDIA_CHANNEL, mode }) });
  const started = (await res.json()) as ScrapeJson;
  if (res.status !== 201) throw new Error(`starting the ${mode} scrape: ${res.status} ${JSON.stringify(started)}`);
  const deadline = Date.now() + timeoutMs;
  let s = started;
  while (s.state !== 'completed') {
    if (s.state === 'failed' || s.state === 'paused') throw new Error(`${mode} scrape ${s.state}: ${s.lastError ?? ''}`);
    if (Date.now() > deadline) throw new Error(`timed out: the ${mode} scrape read ${s.messagesSeen} of ${messages} messages`);
    await new Promise((r) => setTimeout(r, 100));
    const got = await fetch(`${h.url}/admin/archive/scrapes/${started.id}`, { headers: h.admin });
    s = (await got.json()) as ScrapeJson;
  }
  if (s.messagesSeen !== messages) throw new Error(`the ${mode} scrape read ${s.messagesSeen} messages of ${messages}`);
  return s;
}

/**
 * A download scrape of a smaller media channel at Discord's limits (run.ts's), by a Herald that
 * trusts the sandbox's CDN (archive-herald.ts), in a media folder of its own. Two floors, each
 * measured or computed in the same run, the larger the one its ratio is against:
 * - pacing: its pages at the history route's rate, as for links;
 * - fetch and disk: the same files (every name Herald asked the sandbox's CDN for, in its order)
 *   fetched one after another by this process from the same sandbox, hashed and written as Herald
 *   writes them (a temporary file renamed into place), in a folder beside Herald's; and the disk
 *   alone (those writes without the fetches).
 */
async function downloadScrape(databaseUrl: string | undefined, messages: number): Promise<Record<string, number | string>> {
  const sandbox = await new DiscordSandbox({ routeLimit: DISCORD_ROUTE, globalLimit: DISCORD_GLOBAL, mediaMessages: messages }).start();
  const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-bench-download-'));
  try {
    const admin = { authorization: `Bearer ${randomBytes(32).toString('base64url')}` };
    const proc = await startTrusting(
      {
        PORT: '0',
        HOST: '127.0.0.1',
        HERALD_METRICS_PORT: '0',
        LOG_LEVEL: 'info',
        HERALD_ADMIN_TOKEN: admin.authorization.slice('Bearer '.length),
        MCP_BRIDGE_TOKEN: randomBytes(32).toString('base64url'),
        HERALD_DATA_DIR: dataDir,
        DISCORD_TOKEN: sandbox.botToken,
        DISCORD_API_URL: sandbox.apiUrl,
        BENCH_MEDIA_ORIGIN: sandbox.url,
        ...(databaseUrl !== undefined ? { DATABASE_URL: databaseUrl } : {}),
      },
    );
    try {
      const pages = Math.floor(messages / SCRAPE_PAGE_SIZE) + 1;
      const pagesPerS = Math.min(DISCORD_ROUTE.limit / (DISCORD_ROUTE.windowMs / 1000), DISCORD_GLOBAL.limit / (DISCORD_GLOBAL.windowMs / 1000));
      const pacing = pages / pagesPerS;
      const firstFile = sandbox.mediaRequests.length;
      const firstRequest = sandbox.requests.length;
      const s = await scrapeToTheEnd({ url: proc.url ?? '', admin }, 'download', messages, 300_000);
      const seconds = (Date.parse(s.finishedAt ?? '') - Date.parse(s.createdAt)) / 1000;
      const names = sandbox.mediaRequests.slice(firstFile);
      const seen = sandbox.requests.slice(firstRequest);
      const route429 = seen.filter((r) => r.status === 429 && r.scope !== 'global').length;
      const global429 = seen.filter((r) => r.status === 429 && r.scope === 'global').length;
      const stored = (await readdir(path.join(dataDir, 'media'), { recursive: true, withFileTypes: true })).filter((d) => d.isFile()).length;
      const { fetchAndWrite, diskOnly } = await bareDownloads(sandbox.url, names, dataDir);
      const floor = Math.max(pacing, fetchAndWrite);
      const ratio = Math.round((seconds / floor) * 1000) / 1000;
      const key = `scrape download ${messages}`;
      const derivation = `max(pacing: ${pages} pages / ${pagesPerS} per s = ${pacing} s; fetch and disk: the ${names.length} files Herald fetched, fetched one by one from the sandbox, hashed and written tmp+rename beside its folder = ${fetchAndWrite.toFixed(2)} s)`;
      console.log(
        `  ${key} (Discord limits): ${seconds.toFixed(1)} s, ${names.length} files fetched, ${stored} stored, ${(s.bytes / 1_048_576).toFixed(1)} MiB, ${s.itemsFound} items, ${s.errors} refused or failed; ` +
          `floor ${floor.toFixed(2)} s (${derivation}; the disk alone ${diskOnly.toFixed(2)} s), ratio ${ratio}; 429s route ${route429} global ${global429}; ${(names.length / seconds).toFixed(1)} files/s`,
      );
      return {
        [`${key} s`]: Math.round(seconds * 100) / 100,
        [`${key} floor s`]: Math.round(floor * 100) / 100,
        [`${key} ÷ floor`]: ratio,
        [`${key} floor derivation`]: derivation,
        [`${key} pacing floor s`]: pacing,
        [`${key} bare fetch+write s`]: Math.round(fetchAndWrite * 100) / 100,
        [`${key} disk only s`]: Math.round(diskOnly * 100) / 100,
        [`${key} files fetched`]: names.length,
        [`${key} files stored`]: stored,
        [`${key} MiB`]: Math.round((s.bytes / 1_048_576) * 10) / 10,
        [`${key} files/s`]: Math.round((names.length / seconds) * 10) / 10,
        [`${key} route 429s`]: route429,
        [`${key} global 429s`]: global429,
      };
    } finally {
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await proc.closed;
      clearTimeout(timer);
    }
  } finally {
    await sandbox.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** archive-herald.ts in a child process, once it has said it started. */
async function startTrusting(env: Record<string, string>): Promise<HeraldProcess> {
  return awaitStarted(runCommand(process.execPath, ['--import', 'tsx', 'test/bench/archive-herald.ts'], env), "the download bench's Herald");
}

/** The same files fetched one by one, hashed and written as Herald writes them; and the writes alone. */
async function bareDownloads(origin: string, names: string[], beside: string): Promise<{ fetchAndWrite: number; diskOnly: number }> {
  const dir = await mkdtemp(path.join(path.dirname(beside), 'herald-bench-bare-'));
  try {
    const bodies: Buffer[] = [];
    let t = performance.now();
    for (const [i, name] of names.entries()) {
      const res = await fetch(`${origin}/media/${name}`);
      const body = Buffer.from(await res.arrayBuffer());
      bodies.push(body);
      const sha = createHash('sha256').update(body).digest('hex');
      const tmp = path.join(dir, `${i}.part`);
      await writeFile(tmp, body);
      await rename(tmp, path.join(dir, sha));
    }
    const fetchAndWrite = (performance.now() - t) / 1000;
    t = performance.now();
    for (const [i, body] of bodies.entries()) {
      const tmp = path.join(dir, `d${i}.part`);
      await writeFile(tmp, body);
      await rename(tmp, path.join(dir, `d${i}`));
    }
    return { fetchAndWrite, diskOnly: (performance.now() - t) / 1000 };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
