import type { Registry } from 'prom-client';

/** One reading of the few numbers the page shows; counters are cumulative. */
interface Sample {
  at: number;
  depth: number;
  unknown: number;
  oldestDueAge: number;
  delivered: number;
  failed: number;
  rateLimited: number;
  requests: number;
  serverErrors: number;
  /** accept→send histogram: cumulative count per upper bound (seconds). */
  acceptToSend: Map<number, number>;
  links: { name: string; up: boolean }[];
}

const KEEP = 60;

/**
 * The operator's status page: the dashboard's few numbers (outbox depth and age, throughput,
 * accept→send latency, errors, 429s, links) with small inline-SVG charts, sampled from the same
 * registry `/metrics` serves. Server-rendered, no script, no CDN; it refreshes itself.
 */
export class StatusPage {
  private readonly samples: Sample[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly registry: Registry,
    private readonly everyMs = 10_000,
  ) {}

  /** Sample now and every `everyMs` from then on. */
  start(): void {
    if (this.timer !== undefined) return;
    void this.sample();
    this.timer = setInterval(() => void this.sample(), this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  async sample(): Promise<void> {
    let metrics: Awaited<ReturnType<Registry['getMetricsAsJSON']>>;
    try {
      metrics = await this.registry.getMetricsAsJSON();
    } catch {
      return;
    }
    const values = (name: string) => metrics.find((m) => m.name === name)?.values ?? [];
    const sum = (name: string, keep: (labels: Partial<Record<string, string | number>>) => boolean = () => true) =>
      values(name).reduce((total, v) => (keep(v.labels) ? total + v.value : total), 0);
    const acceptToSend = new Map<number, number>();
    for (const v of values('herald_delivery_accept_to_send_seconds')) {
      if ((v as { metricName?: string }).metricName !== 'herald_delivery_accept_to_send_seconds_bucket') continue;
      const le = v.labels['le'] === '+Inf' ? Infinity : Number(v.labels['le']);
      acceptToSend.set(le, (acceptToSend.get(le) ?? 0) + v.value);
    }
    this.samples.push({
      at: Date.now(),
      depth: sum('herald_outbox_jobs', (l) => l['state'] !== 'unknown'),
      unknown: sum('herald_outbox_jobs', (l) => l['state'] === 'unknown'),
      oldestDueAge: Math.max(0, ...values('herald_outbox_oldest_due_age_seconds').map((v) => v.value)),
      delivered: sum('herald_deliveries_finished_total', (l) => l['outcome'] === 'delivered'),
      failed: sum('herald_deliveries_finished_total', (l) => l['outcome'] !== 'delivered'),
      rateLimited: sum('herald_platform_rate_limited_total'),
      requests: sum('herald_http_requests_total'),
      serverErrors: sum('herald_http_requests_total', (l) => String(l['status']).startsWith('5')),
      acceptToSend,
      links: values('herald_transport_link_up').map((v) => ({ name: `${v.labels['transport']} ${v.labels['link']}`, up: v.value === 1 })),
    });
    if (this.samples.length > KEEP) this.samples.splice(0, this.samples.length - KEEP);
  }

  render(): string {
    const s = this.samples;
    const last = s[s.length - 1];
    const pairs = s.slice(1).map((b, i) => [s[i] as Sample, b] as const);
    const perMinute = (f: (x: Sample) => number) => pairs.map(([a, b]) => ((f(b) - f(a)) * 60_000) / Math.max(1, b.at - a.at));
    const quantile = (q: number) => pairs.map(([a, b]) => bucketQuantile(a.acceptToSend, b.acceptToSend, q));
    const charts = [
      chart('Outbox depth (pending + in flight)', s.map((x) => x.depth), ''),
      chart('Oldest due job waiting', s.map((x) => x.oldestDueAge), ' s'),
      chart('Delivered per minute', perMinute((x) => x.delivered), '/min'),
      chart('Failed or unknown per minute', perMinute((x) => x.failed), '/min'),
      chart('Accept → send p95 (upper bucket bound)', quantile(0.95), ' s'),
      chart('HTTP 5xx per minute', perMinute((x) => x.serverErrors), '/min'),
      chart('Discord 429s per minute', perMinute((x) => x.rateLimited), '/min'),
    ];
    const links = (last?.links ?? []).map((l) => `<li>${escape(l.name)}: <b class="${l.up ? 'up' : 'down'}">${l.up ? 'up' : 'down'}</b></li>`).join('');
    return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="${Math.max(5, Math.round(this.everyMs / 1000))}">
<title>Herald status</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5rem;color:#222}h1{font-size:1.2rem}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:1rem}
figure{margin:0;padding:.6rem;border:1px solid #ddd;border-radius:6px}figcaption{color:#555}
.now{font-size:1.4rem;font-weight:600}svg{width:100%;height:48px}polyline{fill:none;stroke:#2a6fdb;stroke-width:1.5}
.up{color:#1a7f37}.down{color:#c62828}
</style></head><body>
<h1>Herald status</h1>
<p>Stored <code>unknown</code> deliveries: <b>${last?.unknown ?? 0}</b>. Links: ${links === '' ? 'none held by this process' : `<ul>${links}</ul>`}</p>
<div class="grid">${charts.join('\n')}</div>
<p>The last ${Math.round((KEEP * this.everyMs) / 60_000)} minutes, sampled every ${Math.round(this.everyMs / 1000)} s from this process's registry (<a href="/metrics">/metrics</a>).
${s.length < 2 ? 'Collecting: rates appear after the second sample.' : ''}</p>
</body></html>
`;
  }
}

/** An upper bound of the q-quantile of what was observed between two cumulative histogram readings. */
function bucketQuantile(before: Map<number, number>, after: Map<number, number>, q: number): number {
  const bounds = [...after.keys()].sort((x, y) => x - y);
  const delta = (le: number) => (after.get(le) ?? 0) - (before.get(le) ?? 0);
  const total = delta(Infinity);
  if (total <= 0) return 0;
  const finite = bounds.filter((le) => le !== Infinity);
  for (const le of finite) if (delta(le) >= q * total) return le;
  return finite[finite.length - 1] ?? 0;
}

function chart(title: string, series: readonly number[], unit: string): string {
  const now = series[series.length - 1];
  const max = Math.max(1e-9, ...series);
  const w = 240;
  const h = 48;
  const step = series.length > 1 ? w / (series.length - 1) : w;
  const points = series.map((v, i) => `${(i * step).toFixed(1)},${(h - 2 - (v / max) * (h - 4)).toFixed(1)}`).join(' ');
  return `<figure><figcaption>${escape(title)}</figcaption><div class="now">${now === undefined ? '–' : `${format(now)}${unit}`}</div>
<svg viewBox="0 0 ${w} ${h}" preserveAspectRatio="none" role="img" aria-label="${escape(title)}"><polyline points="${points}"/></svg></figure>`;
}

function format(v: number): string {
  return Number.isInteger(v) ? String(v) : v.toFixed(v < 10 ? 2 : 1);
}

function escape(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c] ?? c);
}
