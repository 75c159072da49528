import { DiscordSandbox, SANDBOX_MEDIA_CHANNEL, type RateLimitRule } from '../../src/sandbox/sandbox.js';
import { SCRAPE_PAGE_SIZE } from '../../src/modules/archive/scrape.jobs.js';

/**
 * `npm run bench -- --only=scrape`: a links scrape of the sandbox's generated media channel
 * (src/sandbox/media-history.ts; 20,000 messages, `--quick` 2,000), started through the admin API
 * as an operator starts one, by one `herald serve` on the bench's PostgreSQL database.
 *
 * The floor is what the sandbox's limits allow for the history route (GET /channels/{id}/messages,
 * the route the scrape reads; src/sandbox/faults.ts counts it in its own bucket per route and
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
 * floor, their ratio, the 429s the sandbox answered (by scope), and how the floor was derived.
 */

/** What run.ts lends this phase: a Herald process on its database, against a sandbox of this phase's. */
export interface ScrapeHarness {
  start(sandbox: DiscordSandbox): Promise<ScrapeHerald>;
}

export interface ScrapeHerald {
  url: string;
  admin: Record<string, string>;
  stop(): Promise<void>;
}

/** Discord's limits as the bench's drain sandbox sets them (run.ts). */
const DISCORD_ROUTE: RateLimitRule = { limit: 5, windowMs: 5_000 };
const DISCORD_GLOBAL: RateLimitRule = { limit: 50, windowMs: 1_000 };
/** The sandbox's default route limit (src/sandbox/sandbox.ts). */
const SANDBOX_DEFAULT_ROUTE: RateLimitRule = { limit: 50, windowMs: 1_000 };

const HISTORY_PATH = `/channels/${SANDBOX_MEDIA_CHANNEL}/messages`;

interface ScrapeJson {
  id: string;
  state: string;
  messagesSeen: number;
  itemsFound: number;
  errors: number;
  lastError: string | null;
  createdAt: string;
  finishedAt: string | null;
}

export async function scrapePhase(harness: ScrapeHarness, messages: number): Promise<Record<string, number | string>> {
  return {
    ...(await linksScrape(harness, messages, 'Discord limits', DISCORD_ROUTE, 1.2)),
    ...(await linksScrape(harness, messages, 'route 50/s', SANDBOX_DEFAULT_ROUTE, undefined)),
  };
}

async function linksScrape(harness: ScrapeHarness, messages: number, label: string, route: RateLimitRule, target: number | undefined): Promise<Record<string, number | string>> {
  const sandbox = await new DiscordSandbox({ routeLimit: route, globalLimit: DISCORD_GLOBAL, mediaMessages: messages }).start();
  try {
    const h = await harness.start(sandbox);
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
      const res = await fetch(`${h.url}/admin/archive/scrapes`, { method: 'POST', headers: { 'content-type': 'application/json', ...h.admin }, body: JSON.stringify({ channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' }) });
      const started = (await res.json()) as ScrapeJson;
      if (res.status !== 201) throw new Error(`starting the scrape: ${res.status} ${JSON.stringify(started)}`);
      const deadline = Date.now() + floor * 3 * 1000 + 60_000;
      let s = started;
      while (s.state !== 'completed') {
        if (s.state === 'failed' || s.state === 'paused') throw new Error(`scrape ${s.state}: ${s.lastError ?? ''}`);
        if (Date.now() > deadline) throw new Error(`timed out: the scrape read ${s.messagesSeen} of ${messages} messages`);
        await new Promise((r) => setTimeout(r, 100));
        const got = await fetch(`${h.url}/admin/archive/scrapes/${started.id}`, { headers: h.admin });
        s = (await got.json()) as ScrapeJson;
      }
      if (s.messagesSeen !== messages) throw new Error(`the scrape read ${s.messagesSeen} messages of ${messages}`);
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
      const key = `scrape links ${messages} (${label})`;
      console.log(
        `  ${key}: ${seconds.toFixed(1)} s, floor ${floor.toFixed(2)} s (${derivation}), ratio ${ratio}${target !== undefined ? ` (target ≤ ${target})` : ''}; ` +
          `${answered.length} pages answered, ${history.length - answered.length} history requests refused, 429s route ${route429} global ${global429}; ` +
          `page-to-page gap p50 ${gapP50} ms, min ${gapMin} ms; ${s.itemsFound} items`,
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
        [`${key} items`]: s.itemsFound,
      };
    } finally {
      await h.stop();
    }
  } finally {
    await sandbox.close();
  }
}
