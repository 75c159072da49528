import { readFileSync } from 'node:fs';
import { HtmlValidate } from 'html-validate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatBytes } from '../src/infra/bytes.js';
import { apiUrl } from '../src/infra/http/metrics-server.js';
import { StatusPage } from '../src/infra/http/status-page.js';
import { addStatusPanels, createRegistry } from '../src/infra/metrics.js';
import { SANDBOX_MEDIA_CHANNEL } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { freePort } from './support/ports.js';
import { waitFor } from './support/wait.js';

/**
 * The whole document against the HTML standard (html-validate: content models, attributes,
 * nesting, duplicate ids) and its document rules (doctype, lang, title).
 */
const validator = new HtmlValidate({ extends: ['html-validate:recommended', 'html-validate:document'] });

async function problems(html: string, rules: Record<string, 'off'> = {}): Promise<string[]> {
  const report = await validator.validateString(html, 'status.html', { extends: ['html-validate:recommended', 'html-validate:document'], rules });
  return report.results.flatMap((r) => r.messages.map((m) => `${m.line}:${m.column} ${m.ruleId}: ${m.message}`));
}

interface Figure {
  title: string;
  now: string;
  scale: string;
  over: string;
  svg: string;
}

/** The figures of one section of the page, as the operator reads them. */
function section(html: string, name: string): Figure[] {
  const body = new RegExp(`<section>\\n<h2>${name}</h2>\\n([\\s\\S]*?)</section>`).exec(html)?.[1];
  if (body === undefined) throw new Error(`no section ${name}`);
  return [...body.matchAll(/<figure>\n<figcaption>(.*?)<\/figcaption>\n<p class="now">(.*?)<\/p>\n(<svg[\s\S]*?<\/svg>)\n<p class="scale"><span>(.*?)<\/span><span>(.*?)<\/span><\/p>\n<\/figure>/g)].map(
    (m) => ({ title: m[1] ?? '', now: (m[2] ?? '').replace(/<[^>]+>/g, ''), svg: m[3] ?? '', scale: m[4] ?? '', over: m[5] ?? '' }),
  );
}

function figure(html: string, sectionName: string, title: string): Figure {
  const f = section(html, sectionName).find((x) => x.title === title);
  if (f === undefined) throw new Error(`no figure ${title} in ${sectionName}`);
  return f;
}

/** The number a figure shows now (units stripped); NaN for "–". */
const nowOf = (f: Figure): number => Number.parseFloat(f.now);
/** The top of a figure's chart: the largest value it draws. */
const maxOf = (f: Figure): number => Number.parseFloat(f.scale.replace(/^max /, ''));

describe('the status page', { timeout: 120_000 }, () => {
  let h: TestHerald;
  let pageUrl: string;
  const page = async (): Promise<string> => {
    const res = await fetch(pageUrl);
    expect(res.status).toBe(200);
    return res.text();
  };

  beforeAll(async () => {
    // IRC configured but its server not answering: the IRC figures are there, its link down.
    const closed = await freePort();
    h = await startTestHerald({ env: { HERALD_IRC_URL: `irc://127.0.0.1:${closed}`, HERALD_IRC_CHANNELS: '#agents' } });
    pageUrl = `${h.herald.metricsUrl ?? ''}/`;
    await h.mapDestination('alerts', IDS.channels.alerts);
    // The gateway opens once this replica holds its lease, just after start-up.
    await waitFor(async () => figure(await page(), 'discord', 'gateway link').now === 'up', 'the gateway link up', 60_000);
    // Patient: a start-up on the shared, loaded 2-core machine can take over a minute.
  }, 180_000);
  afterAll(() => h?.close(), 60_000);

  it('is valid HTML that loads nothing, under a CSP that allows nothing but its own style', async () => {
    const res = await fetch(pageUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'; /);
    const html = await res.text();
    // The page reloads itself (meta refresh), which the accessibility rule refuses unless the
    // reader can turn it off: it links the page that does not reload, which passes every rule.
    expect(await problems(html, { 'meta-refresh': 'off' })).toEqual([]);
    expect(html).toContain('<meta http-equiv="refresh" content="10">');
    expect(html).toContain('<a href="/?refresh=off">stop reloading</a>');
    const still = await (await fetch(`${pageUrl}?refresh=off`)).text();
    expect(still).not.toContain('http-equiv="refresh"');
    expect(still).toContain('<a href="/">reload every 10 s</a>');
    expect(await problems(still)).toEqual([]);
    // The one stylesheet is the one the policy's hash admits (a browser would drop any other).
    const style = /<style>([\s\S]*?)<\/style>/.exec(html)?.[1] ?? '';
    const { createHash } = await import('node:crypto');
    expect(csp).toContain(`'sha256-${createHash('sha256').update(style).digest('base64')}'`);
    // Nothing from elsewhere: no script, stylesheet link, image, frame or font; the only absolute
    // URLs are the links to this Herald's own API.
    expect(html).not.toMatch(/<script|<link|<img|<iframe|<object|@import|url\(|src=/i);
    for (const m of html.matchAll(/https?:\/\/[^"<\s]+/g)) expect(m[0].startsWith(h.url), m[0]).toBe(true);
    expect(html).not.toMatch(/ style=/);
    // HEAD answers the same headers and no body.
    const head = await fetch(pageUrl, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });

  it('says when it was drawn, how long Herald has been up, and links the API docs and the archive UI on the API port', async () => {
    const html = await page();
    const times = [...html.matchAll(/<time datetime="([^"]+)">([^<]+)<\/time>/g)];
    const asOf = times[0];
    expect(asOf, 'a timestamp').toBeDefined();
    expect(Math.abs(Date.parse(asOf?.[1] ?? '') - Date.now())).toBeLessThan(60_000);
    expect(asOf?.[2]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    const uptime = /Up <time datetime="PT(\d+)S">([^<]+)<\/time>, since <time datetime="([^"]+)">/.exec(html);
    expect(uptime, 'the uptime').not.toBeNull();
    expect(Number(uptime?.[1])).toBeLessThan(600);
    expect(uptime?.[2]).toMatch(/^\d+ (s|min \d+ s)$/);
    expect(Date.parse(uptime?.[3] ?? '')).toBeLessThanOrEqual(Date.now());

    const hrefs = [...html.matchAll(/<a href="([^"]+)">/g)].map((m) => m[1] ?? '');
    expect(hrefs).toEqual(expect.arrayContaining([`${h.url}/docs`, `${h.url}/ui/archive`, '/metrics']));
    // They answer: the page is on the metrics port, the links reach the API's.
    for (const path of ['/docs', '/ui/archive']) {
      const res = await fetch(`${h.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type'), path).toMatch(/^text\/html/);
    }
    expect((await fetch(new URL('/metrics', pageUrl))).status).toBe(200);
  });

  it('shows Discord, IRC and archive figures beside the deliveries, each sparkline with its max and its value now', async () => {
    const html = await page();
    expect([...html.matchAll(/<h2>([^<]+)<\/h2>/g)].map((m) => m[1])).toEqual(['platforms', 'what is on', 'deliveries', 'discord', 'irc', 'archive', 'outbox', 'http api']);
    // The gateway and the IRC connections are held by one replica (a lease): the page says whether this one does.
    expect(section(html, 'discord').map((f) => f.title)).toEqual(['gateway link', 'discord:gateway held here', 'Responses per minute', '429s per minute']);
    expect(section(html, 'irc').map((f) => f.title)).toEqual(['irc:observer held here', 'observer link', 'Lines sent per minute', 'Lines confirmed by echo per minute', 'Reconnects']);
    expect(section(html, 'archive').map((f) => f.title)).toEqual(['Scrapes running', 'Items found per minute', 'Items refused or failed', 'Stored']);
    expect(figure(html, 'discord', 'gateway link').now).toBe('up');
    expect(figure(html, 'irc', 'observer link').now).toBe('down');
    expect(figure(html, 'archive', 'Stored').now).toBe('0 B');
    for (const name of ['deliveries', 'discord', 'irc', 'archive', 'outbox', 'http api']) {
      for (const f of section(html, name)) {
        // A link, or a connection held here, is up or down: its scale counts the samples it was up.
        const upOrDown = f.title.endsWith(' link') || f.title.endsWith(' held here');
        expect(f.scale, `${name}: ${f.title}`).toMatch(upOrDown ? /^up in \d+ of \d+ samples$/ : /^max \S+/);
        expect(f.svg, f.title).toMatch(/^<svg viewBox="0 0 240 48" preserveAspectRatio="none" role="img" aria-label="[^"]*: now [^"]+, (max|up in) [^"]+">/);
      }
    }
  });

  it('says at a glance which platforms Herald speaks, who it is on each and the state of their links, then what is on', async () => {
    const rows = (name: string): string[][] => {
      const body = new RegExp(`<section>\\n<h2>${name}</h2>\\n[\\s\\S]*?<tbody>\\n([\\s\\S]*?)\\n</tbody>`).exec(html)?.[1] ?? '';
      return [...body.matchAll(/<tr>(.*?)<\/tr>/g)].map((m) => [...(m[1] ?? '').matchAll(/<td[^>]*>(.*?)<\/td>/g)].map((c) => c[1] ?? ''));
    };
    const html = await waitFor(async () => {
      const text = await page();
      // Discord's bot id comes from Discord (asked once, in the background).
      return /<td>discord<\/td><td>default<\/td><td>\d+<\/td>/.test(text) ? text : undefined;
    }, 'the Discord identity on the status page', 30_000);
    // Before the charts: the first two sections.
    expect([...html.matchAll(/<h2>([^<]+)<\/h2>/g)].map((m) => m[1]).slice(0, 2)).toEqual(['platforms', 'what is on']);
    const platforms = rows('platforms');
    expect(platforms.map((r) => r.slice(0, 2))).toEqual([
      ['discord', 'default'],
      ['irc', 'default'],
    ]);
    expect(platforms[0]?.[2]).toMatch(/^\d{17,20}$/);
    expect(platforms[0]?.[3]).toBe('gateway up');
    // IRC's identity is its nick; its server does not answer.
    expect(platforms[1]?.[2]).toMatch(/^\S+$/);
    expect(platforms[1]?.[3]).toContain('observer down');
    expect(html).toMatch(/<td class="down">[^<]*observer down/);
    const on = Object.fromEntries(rows('what is on').map((r) => [r[0], { state: r[1], how: r[2] }]));
    expect(Object.keys(on)).toEqual(['command execution', 'trusted bots (handoffs)', 'IRC', 'Slack', 'inbox webhook']);
    expect(on['IRC']?.state).toBe('on');
    expect(on['command execution']).toEqual({ state: 'off', how: expect.stringContaining('HERALD_COMMAND_EXECUTION_ENABLED=true') });
    expect(on['inbox webhook']).toEqual({ state: 'off', how: expect.stringContaining('HERALD_INBOX_WEBHOOK_URL') });
  });

  it('draws what happens: a delivery, a scrape, requests, and a dead IRC link', async () => {
    const id = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', post(id, `status page ${id}`))).status).toBe(202);
    await h.waitForState(id, 'delivered');
    const scrape = await h.bridge.post('/admin/archive/scrapes', { channelId: SANDBOX_MEDIA_CHANNEL, mode: 'links' });
    expect(scrape.status).toBe(201);
    const scrapeId = (scrape.json as { id: string }).id;
    try {
      // A view samples (at most once a second), so rates appear from the second view on.
      const html = await waitFor(async () => {
        const text = await page();
        return maxOf(figure(text, 'deliveries', 'Delivered per minute')) > 0 && maxOf(figure(text, 'archive', 'Items found per minute')) > 0 ? text : undefined;
      }, 'the delivery and the scrape on the status page', 60_000);
      const delivered = figure(html, 'deliveries', 'Delivered per minute');
      // The chart's top is its max (y 2.0), its foot 0 (y 46.0), and a point is drawn for now.
      expect(delivered.svg).toMatch(/<polyline points="[^"]+"\/><circle /);
      expect(delivered.svg).toMatch(/[ "][\d.]+,2\.0[ "]/);
      expect(delivered.over).toMatch(/^last \d+ (s|min)$/);
      expect(maxOf(figure(html, 'http api', 'Requests per minute'))).toBeGreaterThan(0);
      expect(nowOf(figure(html, 'discord', 'Responses per minute'))).not.toBeNaN();
      expect(figure(html, 'irc', 'observer link').scale).toMatch(/^up in 0 of [1-9]\d* samples$/);
      expect(nowOf(figure(html, 'irc', 'Reconnects'))).toBe(0);
    } finally {
      await h.bridge.post(`/admin/archive/scrapes/${scrapeId}/stop`, undefined);
    }
  });
});

describe('the status page of a process without the API (herald dispatch)', () => {
  it('links no API page, says where they are, and is as valid', async () => {
    const registry = createRegistry();
    addStatusPanels(registry, { section: 'process', title: 'Resident memory', metric: 'process_resident_memory_bytes', show: 'max', unit: 'bytes' });
    const page = new StatusPage(registry, { apiPages: [{ title: 'API docs', path: '/docs' }] });
    const html = await page.view({ refresh: false });
    expect(html).not.toContain('/docs');
    expect(html).toContain('<nav><a href="/metrics">Metrics (/metrics)</a></nav>\n<p>This process serves no API: its pages are on a process that does.</p>');
    // Binary units, as the archive UI prints them.
    expect(figure(html, 'process', 'Resident memory').now).toMatch(/^\d+\.\d (KiB|MiB|GiB)$/);
    expect(await problems(html)).toEqual([]);
  });
});

describe('sizes on the status page and in the archive UI', () => {
  it('read alike: one formatter, binary units', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    // 2,350,000 bytes: "2.35 MB" on the status page once, "2.2 MiB" in the archive UI.
    expect(formatBytes(2_350_000)).toBe('2.2 MiB');
    expect(formatBytes(3 * 1024 ** 3)).toBe('3.0 GiB');
    // The archive UI's (a browser bundle, not importable here) is this one.
    expect(readFileSync(new URL('../src/web/archive/format.ts', import.meta.url), 'utf8')).toContain('export const bytes = formatBytes;');
  });
});

describe("the status page's link to the API", () => {
  it('uses the address the API listens on, or the name the reader used when it listens everywhere', () => {
    expect(apiUrl({ host: '127.0.0.1', port: 8787 }, '127.0.0.1:8789')).toBe('http://127.0.0.1:8787');
    expect(apiUrl({ host: '0.0.0.0', port: 8787 }, 'herald.internal:8789')).toBe('http://herald.internal:8787');
    expect(apiUrl({ host: '::', port: 8787 }, '[fd00::1]:8789')).toBe('http://[fd00::1]:8787');
    expect(apiUrl({ host: '::1', port: 8787 }, undefined)).toBe('http://[::1]:8787');
    // A Host header that is no host name is not echoed into a link.
    expect(apiUrl({ host: '0.0.0.0', port: 8787 }, 'x"><script>')).toBe('http://127.0.0.1:8787');
  });
});
