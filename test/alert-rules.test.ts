import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { parser } from '@prometheus-io/lezer-promql';
import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { startTestHerald, type TestHerald } from './support/herald.js';
import { freePort } from './support/ports.js';

const RULES = 'ops/prometheus/alerts.yml';
const RULE_TESTS = 'ops/prometheus/alerts.test.yml';
const DASHBOARD = 'ops/grafana/herald.json';

/** Series Prometheus itself writes for every target: rules may name them beside Herald's. */
const PROMETHEUS_SERIES = new Set(['up', 'scrape_duration_seconds', 'scrape_samples_scraped']);

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: string };
  annotations: { summary?: string; description?: string };
}

/** Where Debian's prometheus package puts promtool, or undefined when it is not installed. */
function promtoolPath(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' });
  const p = found.stdout.trim();
  return found.status === 0 && p !== '' ? p : undefined;
}

const promtool = promtoolPath();
if (promtool === undefined) {
  console.warn('\n*** promtool is not installed (apt-get install prometheus; .ci/run does it): alert rules are checked by the PromQL parser only, promtool check/test SKIPPED ***\n');
}

const strictPromql = parser.configure({ strict: true });

/**
 * The metric names a PromQL expression selects, read from its parse by Prometheus's own grammar
 * (strict: a syntax error throws, with its position).
 */
function selectedMetrics(expr: string): string[] {
  const names: string[] = [];
  strictPromql.parse(expr).iterate({
    enter(ref) {
      if (ref.name !== 'VectorSelector') return;
      const id = ref.node.getChild('Identifier');
      if (id === null) throw new Error(`${expr}: a selector without a metric name ({__name__=...}) cannot be checked; name the metric`);
      names.push(expr.slice(id.from, id.to));
    },
  });
  return names;
}

/** A Prometheus duration (5m, 1h30m). */
const DURATION = /^([0-9]+(ms|s|m|h|d|w|y))+$/;

async function rules(): Promise<Rule[]> {
  const doc = parseYaml(await readFile(RULES, 'utf8')) as { groups: { name: string; rules: Rule[] }[] };
  return doc.groups.flatMap((g) => g.rules);
}

async function dashboardExprs(): Promise<{ where: string; expr: string }[]> {
  const dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };
  // Grafana fills $__rate_interval with a duration before Prometheus sees the query.
  return dashboard.panels.flatMap((p) => p.targets.map((t) => ({ where: p.title, expr: t.expr.replaceAll('$__rate_interval', '5m') })));
}

describe('alert rules', () => {
  it('parse as PromQL, each with a severity, a summary, a description and a well-formed for', async () => {
    const all = await rules();
    expect(all.map((r) => r.alert)).toEqual(
      expect.arrayContaining(['HeraldTargetDown', 'HeraldTargetAbsent', 'HeraldIrcLinkDown', 'HeraldGatewayDown', 'HeraldOutboxOldestDueJobOld', 'HeraldDeliveriesUnknown', 'HeraldDiscordRateLimited']),
    );
    expect(new Set(all.map((r) => r.alert)).size).toBe(all.length);
    for (const r of all) {
      expect(r.alert).toMatch(/^Herald[A-Z][A-Za-z]+$/);
      expect(() => selectedMetrics(r.expr), r.alert).not.toThrow();
      expect(['page', 'ticket'], r.alert).toContain(r.labels.severity);
      expect(r.annotations.summary ?? '', r.alert).not.toBe('');
      expect(r.annotations.description ?? '', r.alert).not.toBe('');
      if (r.for !== undefined) expect(r.for, r.alert).toMatch(DURATION);
    }
    // The grammar does refuse what is not PromQL (the parser is strict, not error-tolerant).
    expect(() => selectedMetrics('sum by (instance (up)')).toThrow();
    expect(() => selectedMetrics('rate(herald_http_requests_total[5x])')).toThrow();
    // A down target, a missing one, and the IRC link, in the words the rules use.
    const byName = new Map(all.map((r) => [r.alert, r]));
    expect(byName.get('HeraldTargetDown')?.expr).toBe('up{job="herald"} == 0');
    expect(byName.get('HeraldTargetAbsent')?.expr).toBe('absent(up{job="herald"})');
    expect(byName.get('HeraldIrcLinkDown')?.expr).toMatch(/herald_transport_link_up\{transport="irc"\}\) == 0$/);
  });

  it('the dashboard\'s queries parse as PromQL too', async () => {
    for (const { where, expr } of await dashboardExprs()) expect(() => selectedMetrics(expr), `${where}: ${expr}`).not.toThrow();
  });

  it.runIf(promtool !== undefined)('pass promtool check rules, and promtool test rules (alerts.test.yml: down, absent, IRC link)', () => {
    const check = spawnSync(promtool ?? 'promtool', ['check', 'rules', RULES], { encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toMatch(/SUCCESS: \d+ rules found/);
    const unit = spawnSync(promtool ?? 'promtool', ['test', 'rules', RULE_TESTS], { encoding: 'utf8' });
    expect(unit.status, unit.stdout + unit.stderr).toBe(0);
    expect(unit.stdout).toContain('SUCCESS');
  });
});

describe('every metric the alert rules and the dashboard name', () => {
  let h: TestHerald;
  let families: Map<string, ParsedFamily>;

  beforeAll(async () => {
    // IRC configured (its server not answering): its metrics are registered as in production.
    const closed = await freePort();
    h = await startTestHerald({ env: { HERALD_IRC_URL: `irc://127.0.0.1:${closed}` }, sandbox: { mediaMessages: 0 } });
    const res = await fetch(`${h.herald.metricsUrl ?? ''}/metrics`);
    expect(res.status).toBe(200);
    families = new Map(parsePrometheusTextFormat(await res.text()).map((f) => [f.name, f]));
    // Patient: a start-up on the shared, loaded 2-core machine can take over a minute.
  }, 180_000);
  afterAll(() => h?.close(), 60_000);

  /** The family a series name belongs to: histograms expose _bucket, _sum and _count series. */
  const exported = (name: string): boolean => {
    const base = name.replace(/_(bucket|sum|count)$/, '');
    return families.has(name) || families.get(base)?.type === 'HISTOGRAM';
  };

  it('is one a started Herald exports (or one Prometheus writes for each target)', async () => {
    const exprs = [...(await rules()).map((r) => ({ where: r.alert, expr: r.expr })), ...(await dashboardExprs())];
    for (const { where, expr } of exprs) {
      const names = selectedMetrics(expr);
      expect(names.length, `${where}: ${expr}`).toBeGreaterThan(0);
      for (const name of names) expect(PROMETHEUS_SERIES.has(name) || exported(name), `${where} selects ${name}, which Herald does not export`).toBe(true);
    }
    // And the check can fail: a misspelt name is not exported.
    expect(exported('herald_transport_links_up')).toBe(false);
    const onDashboard = new Set((await dashboardExprs()).flatMap((e) => selectedMetrics(e.expr)));
    for (const name of ['herald_outbox_jobs', 'herald_outbox_oldest_due_age_seconds', 'herald_delivery_accept_to_send_seconds_bucket', 'herald_platform_rate_limited_total', 'herald_http_requests_total']) {
      expect(onDashboard, name).toContain(name);
    }
  });
});
