import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { payloadHash, type Delivery } from '../src/modules/deliveries/delivery.js';
import { insertDeliveries } from '../src/modules/deliveries/delivery.repository.js';
import { ScrapeRead } from '../src/infra/metrics.js';
import { client } from './support/client.js';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';
import { tablesOf } from '../src/infra/db/tables.js';
import type { DeliveriesDb } from '../src/modules/deliveries/delivery.table.js';

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * Each sample line of the text format, strictly: parse-prometheus-text-format checks the families
 * (names, help, types) but folds a histogram's label sets into one, so series are read here.
 */
function samples(text: string): Sample[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*)\})? (\S+)$/.exec(line);
      if (m === null) throw new Error(`malformed sample line: ${line}`);
      const labels: Record<string, string> = {};
      for (const [, k = '', v = ''] of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        if (k in labels) throw new Error(`label ${k} twice: ${line}`);
        labels[k] = v;
      }
      const value = m[3] === '+Inf' ? Infinity : m[3] === '-Inf' ? -Infinity : Number(m[3]);
      if (Number.isNaN(value) && m[3] !== 'NaN') throw new Error(`not a number: ${line}`);
      return { name: m[1] ?? '', labels, value };
    });
}

/** The family a sample name belongs to: histograms expose _bucket, _sum and _count series. */
function familyOf(name: string, families: ReadonlyMap<string, ParsedFamily>): ParsedFamily | undefined {
  const base = name.replace(/_(bucket|sum|count)$/, '');
  return families.get(name) ?? (families.get(base)?.type === 'HISTOGRAM' ? families.get(base) : undefined);
}

describe('metrics', () => {
  let h: TestHerald;
  let metricsUrl: string;
  const scrape = async (): Promise<string> => {
    const res = await fetch(`${metricsUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return res.text();
  };

  beforeAll(async () => {
    h = await startTestHerald();
    metricsUrl = h.herald.metricsUrl ?? '';
    await h.mapDestination('alerts', IDS.channels.alerts);
  });
  afterAll(() => h.close());

  it('serves a parseable scrape on its own port after a post, a failure and a re-drive', async () => {
    const delivered = newRequestId();
    const failed = newRequestId();
    const abandoned = newRequestId();
    const content = `metrics content ${delivered}`;
    // A post that is delivered, one that fails (its destination has no channel) and is re-POSTed
    // (a re-drive), and one whose dispatcher died mid-attempt (its lease expired: a re-drive too).
    expect((await h.bridge.post('/mcp/deliveries', post(delivered, content))).status).toBe(202);
    expect((await h.bridge.post('/mcp/deliveries', post(failed, 'unmapped', 'digest'))).status).toBe(202);
    await h.waitForState(delivered, 'delivered');
    await h.waitForState(failed, 'failed');
    expect((await h.bridge.post('/mcp/deliveries', post(failed, 'unmapped', 'digest'))).json).toMatchObject({ existing: true });
    await h.waitForState(failed, 'failed');
    const lost: Delivery = { request_id: abandoned, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts' }, body: { content: `abandoned ${abandoned}` } };
    const past = new Date(Date.now() - 5_000);
    await insertDeliveries(tablesOf<DeliveriesDb>(h.herald.store.db), [{
      request_id: abandoned,
      kind: 'post',
      target: JSON.stringify(lost.target),
      body: JSON.stringify(lost.body),
      payload_hash: payloadHash(lost),
      status: 'in_flight',
      created_at: past,
      next_attempt_at: past,
      attempts: 1,
      attempt_started_at: past,
      lease_owner: 'worker-that-died',
      lease_expires_at: new Date(past.getTime() + 1_000),
    }]);
    await h.waitForState(abandoned, 'delivered');
    // Refused: a wrong bearer token and a wrong pairing code.
    expect((await client(h.url, 'wrong-token').get('/mcp/capabilities')).status).toBe(401);
    expect((await h.bridge.post('/mcp/pair/redeem', { code: 'ABCDEFGHJKLMNPQRSTUVWXYZ234' })).status).toBe(404);

    // Not on the API's port: only where the operator bound the metrics port.
    expect((await fetch(`${h.url}/metrics`)).status).toBe(404);
    expect(new URL(metricsUrl).hostname).toBe('127.0.0.1');

    const text = await scrape();
    const parsed = parsePrometheusTextFormat(text);
    const families = new Map(parsed.map((f) => [f.name, f]));
    // No family twice, in the parse or in the text.
    expect(families.size).toBe(parsed.length);
    const typeLines = text.split('\n').filter((l) => l.startsWith('# TYPE '));
    expect(new Set(typeLines.map((l) => l.split(' ')[2])).size).toBe(typeLines.length);
    expect(typeLines.length).toBe(parsed.length);
    for (const f of parsed) {
      expect(f.name, f.name).toMatch(NAME);
      expect(f.help, `${f.name} help`).not.toBe('');
      expect(['COUNTER', 'GAUGE', 'HISTOGRAM', 'SUMMARY'], f.name).toContain(f.type);
      if (f.name.startsWith('herald_')) {
        expect(f.type === 'COUNTER', `${f.name}: counters and only counters end in _total`).toBe(f.name.endsWith('_total'));
        if (f.type === 'HISTOGRAM') expect(f.name, 'histograms are in base units').toMatch(/_seconds$/);
      }
      for (const m of f.metrics) {
        for (const k of Object.keys(m.labels ?? {})) expect(k, f.name).toMatch(LABEL);
        if (f.type === 'COUNTER' || f.type === 'GAUGE') expect(Number.isNaN(Number(m.value)), `${f.name} value ${String(m.value)}`).toBe(false);
      }
    }
    // Every series line: well-formed, of a declared family, and histograms cumulative with +Inf = _count.
    const series = samples(text);
    const histograms = new Map<string, Sample[]>();
    for (const x of series) {
      const family = familyOf(x.name, families);
      expect(family, `${x.name} has a # TYPE`).toBeDefined();
      for (const [k, v] of Object.entries(x.labels)) {
        // Labels carry fixed words, never ids, tokens or content.
        expect(v, `${x.name}{${k}}`).not.toMatch(/[0-9a-f]{32}|[0-9]{15,}|content/);
        expect([h.bridgeToken, h.adminToken, IDS.guild]).not.toContain(v);
      }
      if (family?.type !== 'HISTOGRAM') continue;
      const { le, ...rest } = x.labels;
      const key = `${family.name}${JSON.stringify(Object.entries(rest).sort())}`;
      histograms.set(key, [...(histograms.get(key) ?? []), { ...x, labels: le === undefined ? rest : { le } }]);
    }
    expect(histograms.size).toBeGreaterThan(0);
    for (const [key, lines] of histograms) {
      const buckets = lines.filter((l) => l.name.endsWith('_bucket'));
      const bounds = buckets.map((b) => (b.labels['le'] === '+Inf' ? Infinity : Number(b.labels['le'])));
      expect(bounds, `${key} bounds ascend`).toEqual([...bounds].sort((a, b) => a - b));
      expect(bounds[bounds.length - 1], `${key} ends with +Inf`).toBe(Infinity);
      const counts = buckets.map((b) => b.value);
      expect(counts, `${key} buckets are cumulative`).toEqual([...counts].sort((a, b) => a - b));
      expect(counts[counts.length - 1], `${key} +Inf is the count`).toBe(lines.find((l) => l.name.endsWith('_count'))?.value);
      expect(lines.some((l) => l.name.endsWith('_sum')), `${key} has a _sum`).toBe(true);
    }
    expect(text).not.toContain(content);
    expect(text).not.toContain(delivered);

    /** The sum of a counter's or gauge's series (a histogram's _count) with these labels. */
    const value = (name: string, labels: Record<string, string> = {}): number =>
      series
        .filter((x) => (x.name === name || x.name === `${name}_count`) && Object.entries(labels).every(([k, v]) => x.labels[k] === v))
        .reduce((sum, x) => sum + x.value, 0);
    expect(value('herald_http_requests_total', { operation: 'createDelivery', status: '202' })).toBeGreaterThanOrEqual(3);
    expect(value('herald_http_request_duration_seconds', { operation: 'createDelivery' })).toBeGreaterThanOrEqual(3);
    expect(value('herald_http_auth_failures_total', { area: 'bridge', reason: 'unauthorized' })).toBe(1);
    expect(value('herald_pairing_redeem_failures_total', { reason: 'invalid' })).toBe(1);
    expect(value('herald_deliveries_accepted_total', { kind: 'post' })).toBe(2);
    expect(value('herald_deliveries_finished_total', { kind: 'post', outcome: 'delivered', code: 'none' })).toBe(2);
    expect(value('herald_deliveries_finished_total', { kind: 'post', outcome: 'failed', code: 'UPSTREAM_UNAVAILABLE' })).toBe(2);
    expect(value('herald_post_unmapped_total')).toBe(2);
    expect(value('herald_delivery_redrives_total', { kind: 'post' })).toBe(1);
    expect(value('herald_delivery_lease_expiries_total', { kind: 'post' })).toBe(1);
    expect(value('herald_delivery_accept_to_send_seconds', { kind: 'post' })).toBe(2);
    expect(value('herald_delivery_claim_to_send_seconds', { kind: 'post' })).toBe(2);
    expect(value('herald_outbox_jobs_claimed_total', { kind: 'post' })).toBeGreaterThanOrEqual(4);
    expect(value('herald_outbox_job_duration_seconds', { kind: 'post' })).toBeGreaterThanOrEqual(4);
    expect(value('herald_platform_responses_total', { transport: 'discord', method: 'POST', status: '200' })).toBeGreaterThanOrEqual(2);
    expect(families.get('herald_transport_link_up')?.metrics).toEqual([{ value: '1', labels: { transport: 'discord', link: 'gateway' } }]);
    // Read from the database at scrape time: nothing waits now, every kind (post, dm, edit, reaction, delete, reply, handoff, chat) and state reported.
    expect(families.get('herald_outbox_jobs')?.metrics).toHaveLength(24);
    expect(value('herald_outbox_jobs', { state: 'pending' })).toBe(0);
    expect(families.get('herald_outbox_oldest_due_age_seconds')?.metrics.map((m) => m.labels?.['kind']).sort()).toEqual(['chat', 'delete', 'dm', 'edit', 'handoff', 'post', 'reaction', 'reply']);
    for (const name of ['herald_delivery_retries_total', 'herald_delivery_reconciliations_total', 'herald_delivery_leases_lost_total', 'herald_platform_rate_limited_total', 'herald_outbox_depth_read_failures_total']) {
      expect(families.has(name), name).toBe(true);
    }
    // Default process metrics, on the same registry.
    for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_p99_seconds']) expect(families.has(name), name).toBe(true);
  });

  it('counts Discord 429s by scope', async () => {
    const id = newRequestId();
    // A 429 without X-RateLimit-Scope (the sandbox's rate limits send user or global).
    h.sandbox.inject({ method: 'POST', path: '/messages$', action: 'error', status: 429, code: 0, times: 1 });
    expect((await h.bridge.post('/mcp/deliveries', post(id, 'after a 429'))).status).toBe(202);
    await h.waitForState(id, 'delivered');
    const families = new Map(parsePrometheusTextFormat(await scrape()).map((f) => [f.name, f]));
    expect(families.get('herald_platform_rate_limited_total')?.metrics).toContainEqual({ value: '1', labels: { transport: 'discord', scope: 'unknown', identity: 'default' } });
    expect(families.get('herald_platform_responses_total')?.metrics).toContainEqual({ value: '1', labels: { transport: 'discord', method: 'POST', status: '429', identity: 'default' } });
  });

  it('shows the same numbers on a status page with inline SVG charts and no outside resources', async () => {
    // On PostgreSQL the gateway is held by one replica's lease, which a loaded machine can let lapse
    // and take again: the page is read until it shows the link up, as an operator would reload it.
    const gatewayUp = /<h2>discord<\/h2>\n<div class="grid">\n<figure>\n<figcaption>gateway link<\/figcaption>\n<p class="now"><b class="up">up<\/b><\/p>/;
    let html = '';
    await waitFor(async () => {
      const res = await fetch(`${metricsUrl}/`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      html = await res.text();
      return gatewayUp.test(html);
    }, 'the status page to show the gateway link up', 60_000);
    for (const title of ['Depth (pending + in flight)', 'Oldest due job waiting', 'Delivered per minute', 'Accept → send p95', '429s per minute']) expect(html).toContain(title);
    expect(html).toContain('<svg');
    expect(html).not.toMatch(/<script|<link|src=/);
    // Absolute links only to this Herald's API (its docs and the archive UI); test/status-page.test.ts has the rest.
    for (const m of html.matchAll(/https?:\/\/[^"<\s]+/g)) expect(m[0].startsWith(`${h.url}/`), m[0]).toBe(true);
  }, 90_000);
});

describe('a scrape-time read', () => {
  it('never makes a scrape wait past its timeout, and reuses a recent reading', async () => {
    let reads = 0;
    let release: (() => void) | undefined;
    const slow = new ScrapeRead(
      () => {
        reads += 1;
        return new Promise<number>((resolve) => (release = () => resolve(reads)));
      },
      { maxAgeMs: 60_000, timeoutMs: 50 },
    );
    const started = performance.now();
    expect(await slow.get()).toBeUndefined();
    expect(await slow.get()).toBeUndefined();
    expect(performance.now() - started).toBeLessThan(1_000);
    // One read at a time: scrapes do not pile reads onto the store.
    expect(reads).toBe(1);
    release?.();
    await waitFor(async () => (await slow.get()) === 1, 'the slow reading to arrive');
    expect(await slow.get()).toBe(1);
    expect(reads).toBe(1);
  });

  it('reports nothing (not a stale number) when the read fails', async () => {
    const failing = new ScrapeRead(() => Promise.reject(new Error('database unreachable')), { maxAgeMs: 0, timeoutMs: 1_000 });
    expect(await failing.get()).toBeUndefined();
  });
});
