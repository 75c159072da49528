import { createHash } from 'node:crypto';
import type { Registry } from 'prom-client';
import { formatBytes } from '../bytes.js';
import { statusPanels, type SeriesLabels, type StatusPanel } from '../metrics.js';
import { linkStates, overview, OVERVIEW_STYLE, type CapabilityRow, type PlatformRow } from './status-overview.js';

/** Cumulative count per upper bound (seconds) of a histogram. */
type Buckets = Map<number, number>;

/** One reading of every figure; sums of counters are cumulative. */
interface Sample {
  at: number;
  values: Map<string, number | Buckets>;
}

/** Samples kept: this many sampling periods back (10 minutes at the default period). */
const KEEP = 60;
/** A page view takes a sample of its own when the last one is older than this: the page shows now. */
const FRESH_MS = 1_000;
const CHART_W = 240;
const CHART_H = 48;

const STYLE = `body{font:14px system-ui,sans-serif;margin:1.5rem;color:#222}h1{font-size:1.2rem;margin:0 0 .3rem}
h2{font-size:.85rem;text-transform:uppercase;letter-spacing:.06em;color:#555;margin:1.4rem 0 .5rem}
header p{margin:.2rem 0;color:#444}nav a{margin-right:1rem}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:1rem}
figure{margin:0;padding:.6rem;border:1px solid #ddd;border-radius:6px}figcaption{color:#555}
.now{font-size:1.4rem;font-weight:600;margin:.1rem 0}svg{display:block;width:100%;height:48px}
polyline{fill:none;stroke:#2a6fdb;stroke-width:1.5}line{stroke:#ccc;stroke-width:1;stroke-dasharray:3 3}circle{fill:#2a6fdb}
.scale{display:flex;justify-content:space-between;color:#666;font-size:12px;margin:.2rem 0 0}
.up{color:#1a7f37}.down{color:#c62828}
${OVERVIEW_STYLE}`;

/**
 * The page's Content-Security-Policy: nothing may load, only its own stylesheet (by hash) applies.
 * The page has no script; charts are inline SVG.
 */
export const STATUS_PAGE_CSP = `default-src 'none'; style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;

export interface RenderOptions {
  /** Where the API answers, when this process serves one: the page links its `pages` there. */
  apiUrl?: string | undefined;
  /** Reload the page every sampling period (a reader can turn it off). Default true. */
  refresh?: boolean;
  now?: Date;
  /** Each platform's links now (linkStates); view() reads them. */
  links?: ReadonlyMap<string, string>;
}

/** A page of the API the status page links to (its docs, a module's UI). */
export interface ApiPage {
  title: string;
  /** From the API's base URL, e.g. `/docs`. */
  path: string;
}

export interface StatusPageOptions {
  /** Pages of the API to link to, when this process serves it. */
  apiPages?: readonly ApiPage[];
  /** Sample every this often (default 10 s). */
  everyMs?: number;
  /** When this Herald started: the page shows its uptime. */
  startedAt?: Date;
  /** What is on and how to turn on what is off (src/capabilities.ts), shown first. */
  capabilities?: readonly CapabilityRow[];
  /** The platforms Herald speaks and who it is on each, shown with their links' state. */
  platforms?: readonly PlatformRow[];
}

/**
 * The operator's status page: the figures the modules and transports declared beside their metrics
 * (statusPanels), sampled from the same registry `/metrics` serves and drawn as small inline-SVG
 * charts with their scale, grouped by who declared them. Sampled every few seconds and when the
 * page is read. Server-rendered, no script, no CDN; it refreshes itself.
 */
export class StatusPage {
  private readonly samples: Sample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private pending: Promise<void> | undefined;
  private readonly everyMs: number;
  private readonly startedAt: Date;
  private readonly apiPages: readonly ApiPage[];
  private readonly capabilities: readonly CapabilityRow[];
  private readonly platforms: readonly PlatformRow[];

  constructor(
    private readonly registry: Registry,
    options: StatusPageOptions = {},
  ) {
    this.everyMs = options.everyMs ?? 10_000;
    this.startedAt = options.startedAt ?? new Date();
    this.apiPages = options.apiPages ?? [];
    this.capabilities = options.capabilities ?? [];
    this.platforms = options.platforms ?? [];
  }

  /** Sample now and every `everyMs` from then on. */
  start(): void {
    if (this.timer !== undefined) return;
    void this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** How many samples were taken (and kept). */
  get sampled(): number {
    return this.samples.length;
  }

  async sample(): Promise<void> {
    let metrics: Awaited<ReturnType<Registry['getMetricsAsJSON']>>;
    try {
      metrics = await this.registry.getMetricsAsJSON();
    } catch {
      return;
    }
    const values = new Map<string, number | Buckets>();
    for (const panel of statusPanels(this.registry)) {
      const series = (metrics.find((m) => m.name === panel.metric)?.values ?? []).filter((v) => panel.where?.(v.labels as SeriesLabels) ?? true);
      if (panel.show === 'p95') {
        const buckets: Buckets = new Map();
        for (const v of series) {
          if ((v as { metricName?: string }).metricName !== `${panel.metric}_bucket`) continue;
          const le = v.labels['le'] === '+Inf' ? Infinity : Number(v.labels['le']);
          buckets.set(le, (buckets.get(le) ?? 0) + v.value);
        }
        if (buckets.size > 0) values.set(keyOf(panel), buckets);
        continue;
      }
      // A counter with no series yet has counted nothing: 0, so its first increment shows as a rate.
      // Any other family with none (a failed read, a link not reported) has no value, not a zero.
      if (series.length === 0) {
        // (prom-client reports the type as a word, 'counter', whatever its typings say.)
        if (metrics.some((m) => m.name === panel.metric && (m.type as unknown) === 'counter')) values.set(keyOf(panel), 0);
        continue;
      }
      const numbers = series.map((v) => v.value);
      values.set(keyOf(panel), panel.show === 'max' ? Math.max(...numbers) : panel.show === 'up' ? Math.min(...numbers) : numbers.reduce((a, b) => a + b, 0));
    }
    const at = Date.now();
    this.samples.push({ at, values });
    // By age, since page views sample too; and by count, however often the page is read.
    const old = this.samples.findIndex((x) => x.at >= at - KEEP * this.everyMs);
    if (old > 0) this.samples.splice(0, old);
    if (this.samples.length > KEEP * 10) this.samples.splice(0, this.samples.length - KEEP * 10);
  }

  /** The page as of now. */
  async view(options: RenderOptions = {}): Promise<string> {
    await this.refresh();
    return this.render({ links: await linkStates(this.registry), ...options });
  }

  /**
   * Sample unless a sample was just taken or is being taken: views and the timer together never
   * sample closer than FRESH_MS, so no rate is computed over a sliver of time.
   */
  private refresh(): Promise<void> {
    const last = this.samples[this.samples.length - 1];
    if (this.pending === undefined && (last === undefined || Date.now() - last.at >= FRESH_MS)) {
      this.pending = this.sample().finally(() => (this.pending = undefined));
    }
    return this.pending ?? Promise.resolve();
  }

  render(options: RenderOptions = {}): string {
    const now = options.now ?? new Date();
    const refresh = options.refresh ?? true;
    const everyS = Math.max(5, Math.round(this.everyMs / 1000));
    const s = this.samples;
    const first = s[0];
    const last = s[s.length - 1];
    const span = { from: first?.at ?? 0, to: last?.at ?? 0 };
    const sections = new Map<string, StatusPanel[]>();
    for (const panel of statusPanels(this.registry)) sections.set(panel.section, [...(sections.get(panel.section) ?? []), panel]);
    const api = options.apiUrl;
    const pages = api === undefined ? [] : this.apiPages.map((p) => `<a href="${escape(`${api}${p.path}`)}">${escape(`${p.title} (${p.path})`)}</a>`);
    const links = `<nav>${[...pages, '<a href="/metrics">Metrics (/metrics)</a>'].join('')}</nav>${api === undefined ? '\n<p>This process serves no API: its pages are on a process that does.</p>' : ''}`;
    const uptimeMs = Math.max(0, now.getTime() - this.startedAt.getTime());
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${refresh ? `<meta http-equiv="refresh" content="${everyS}">\n` : ''}<title>Herald status</title>
<style>${STYLE}</style>
</head>
<body>
<header>
<h1>Herald status</h1>
<p>As of ${timeTag(now)}; last sample ${last === undefined ? 'not taken yet' : timeTag(new Date(last.at))}.</p>
<p>Up <time datetime="PT${Math.floor(uptimeMs / 1000)}S">${duration(uptimeMs)}</time>, since ${timeTag(this.startedAt)}.</p>
<p>${refresh ? `This page reloads every ${everyS} s: <a href="/?refresh=off">stop reloading</a>.` : `This page does not reload: <a href="/">reload every ${everyS} s</a>.`}</p>
${links}
</header>
<main>
${overview(this.capabilities, this.platforms, options.links ?? new Map())}
${[...sections].map(([name, panels]) => section(name, panels, s, span)).join('\n')}
</main>
<footer>
<p>Up to the last ${Math.round((KEEP * this.everyMs) / 60_000)} minutes, sampled every ${Math.round(this.everyMs / 1000)} s from this process's registry (<a href="/metrics">/metrics</a>). Each chart runs from 0 at its foot to its max at its top.${s.length < 2 ? ' Collecting: rates appear after the second sample.' : ''}</p>
</footer>
</body>
</html>
`;
  }
}

function keyOf(panel: StatusPanel): string {
  return `${panel.section}\u0000${panel.title}`;
}

/** A section's figures, its links first: whether a platform is reachable at all comes before its rates. */
function section(name: string, panels: readonly StatusPanel[], samples: readonly Sample[], span: Span): string {
  const ordered = [...panels].sort((a, b) => Number(b.show === 'up') - Number(a.show === 'up'));
  return `<section>\n<h2>${escape(name)}</h2>\n<div class="grid">\n${ordered.map((p) => figure(p, seriesOf(p, samples), span)).join('\n')}\n</div>\n</section>`;
}

/** The time the samples kept cover (ms since the epoch). */
interface Span {
  from: number;
  to: number;
}

/** A figure at a time: a sample's, or the end of the period a rate or percentile covers. */
interface Point {
  at: number;
  v: number;
}

/** A panel's figures over the samples kept: one per sample, or per pair of samples for rates. */
function seriesOf(panel: StatusPanel, samples: readonly Sample[]): Point[] {
  const key = keyOf(panel);
  const readings = samples.flatMap((x) => {
    const v = x.values.get(key);
    return v === undefined ? [] : [{ at: x.at, v }];
  });
  if (panel.show === 'p95' || panel.show === 'perMinute') {
    return readings.slice(1).flatMap((b, i) => {
      const a = readings[i] as { at: number; v: number | Buckets };
      // A period that observed nothing has no percentile (not a latency of 0): it is left out.
      if (b.v instanceof Map) {
        const q = a.v instanceof Map ? bucketQuantile(a.v, b.v, 0.95) : undefined;
        return q === undefined ? [] : [{ at: b.at, v: q }];
      }
      // A counter reset (restart) or a gauge that fell (a scrape deleted) is no negative rate.
      return typeof a.v === 'number' ? [{ at: b.at, v: Math.max(0, ((b.v - a.v) * 60_000) / Math.max(1, b.at - a.at)) }] : [];
    });
  }
  return readings.flatMap((r) => (typeof r.v === 'number' ? [{ at: r.at, v: r.v }] : []));
}

/** An upper bound of the q-quantile of what was observed between two cumulative histogram readings; undefined when nothing was. */
function bucketQuantile(before: Buckets, after: Buckets, q: number): number | undefined {
  const bounds = [...after.keys()].sort((x, y) => x - y);
  const delta = (le: number) => (after.get(le) ?? 0) - (before.get(le) ?? 0);
  const total = delta(Infinity);
  if (total <= 0) return undefined;
  const finite = bounds.filter((le) => le !== Infinity);
  for (const le of finite) if (delta(le) >= q * total) return le;
  return finite[finite.length - 1] ?? 0;
}

/** One figure: its name, the value now, a sparkline from 0 (foot) to the max (top), and that scale in words. */
function figure(panel: StatusPanel, points: readonly Point[], span: Span): string {
  const series = points.map((p) => p.v);
  const now = series[series.length - 1];
  const up = panel.show === 'up';
  const max = up ? 1 : Math.max(0, ...series);
  const spanMs = span.to - span.from;
  const nowText = now === undefined ? '–' : up ? (now === 1 ? 'up' : 'down') : withUnit(now, panel.unit);
  const nowHtml = up && now !== undefined ? `<b class="${now === 1 ? 'up' : 'down'}">${nowText}</b>` : escape(nowText);
  const scale = up
    ? `up in ${series.filter((v) => v === 1).length} of ${series.length} samples`
    : `max ${withUnit(max, panel.unit)}`;
  const over = spanMs < 60_000 ? `last ${Math.round(spanMs / 1000)} s` : `last ${Math.round(spanMs / 60_000)} min`;
  return `<figure>
<figcaption>${escape(panel.title)}</figcaption>
<p class="now">${nowHtml}</p>
${sparkline(points, span, max, `${panel.title}, ${over}: now ${nowText}, ${scale}`)}
<p class="scale"><span>${escape(scale)}</span><span>${escape(over)}</span></p>
</figure>`;
}

/** Time runs left to right over the span (samples are irregular: page views sample too), 0 at the foot, max at the top. */
function sparkline(points: readonly Point[], span: Span, max: number, label: string): string {
  const top = 2;
  const foot = CHART_H - 2;
  const x = (at: number) => (span.to > span.from ? ((at - span.from) / (span.to - span.from)) * CHART_W : CHART_W);
  const y = (v: number) => (max <= 0 ? foot : foot - (v / max) * (foot - top));
  const xy = points.map((p) => `${x(p.at).toFixed(1)},${y(p.v).toFixed(1)}`);
  const last = points[points.length - 1];
  const dot = last === undefined ? '' : `<circle cx="${x(last.at).toFixed(1)}" cy="${y(last.v).toFixed(1)}" r="2.5"/>`;
  return `<svg viewBox="0 0 ${CHART_W} ${CHART_H}" preserveAspectRatio="none" role="img" aria-label="${escape(label)}"><line x1="0" y1="${top}" x2="${CHART_W}" y2="${top}"/><line x1="0" y1="${foot}" x2="${CHART_W}" y2="${foot}"/>${xy.length > 1 ? `<polyline points="${xy.join(' ')}"/>` : ''}${dot}</svg>`;
}

function withUnit(v: number, unit: string | undefined): string {
  if (unit === 'bytes') return formatBytes(v);
  return `${format(v)}${unit ?? ''}`;
}

function format(v: number): string {
  if (Number.isInteger(v) || v >= 100) return String(Math.round(v));
  return v.toFixed(v < 10 ? 2 : 1);
}

/** 3 d 4 h, 2 h 5 min, 4 min 10 s, 12 s. */
function duration(ms: number): string {
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d} d ${h} h`;
  if (h > 0) return `${h} h ${m} min`;
  if (m > 0) return `${m} min ${s % 60} s`;
  return `${s} s`;
}

function timeTag(at: Date): string {
  const iso = at.toISOString();
  return `<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`;
}

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}
