import { Counter, Histogram, type Registry } from 'prom-client';
import { addStatusPanels, LATENCY_BUCKETS } from '../metrics.js';

/** Which protected area a request was for. */
export type AuthArea = 'bridge' | 'admin';

/** The HTTP API's metrics: requests by operation and status, their duration, failed authentications. */
export class HttpMetrics {
  private readonly requests: Counter<'operation' | 'status'>;
  private readonly duration: Histogram<'operation'>;
  private readonly authFailures: Counter<'area' | 'reason'>;
  private readonly series = new Map<string, { count: Counter.Internal; time: Histogram.Internal<'operation'> }>();

  constructor(registry: Registry) {
    this.requests = new Counter({
      name: 'herald_http_requests_total',
      help: 'HTTP requests answered, by contract operationId (unmatched: no operation, e.g. refused before routing) and status code',
      labelNames: ['operation', 'status'],
      registers: [registry],
    });
    this.duration = new Histogram({
      name: 'herald_http_request_duration_seconds',
      help: 'Time to answer an HTTP request, by contract operationId',
      labelNames: ['operation'],
      buckets: [...LATENCY_BUCKETS],
      registers: [registry],
    });
    this.authFailures = new Counter({
      name: 'herald_http_auth_failures_total',
      help: 'Requests refused for a missing or wrong bearer token, by area; reason throttled: refused with 429 after too many failures',
      labelNames: ['area', 'reason'],
      registers: [registry],
    });
    addStatusPanels(
      registry,
      { section: 'http api', title: 'Requests per minute', metric: 'herald_http_requests_total', show: 'perMinute', unit: '/min' },
      { section: 'http api', title: '5xx answers per minute', metric: 'herald_http_requests_total', show: 'perMinute', where: (l) => String(l['status']).startsWith('5'), unit: '/min' },
    );
  }

  /** One answered request; `operation` is the contract's operationId (a fixed set), never a path. */
  request(operation: string | undefined, status: number, seconds: number): void {
    const op = operation ?? 'unmatched';
    const key = `${op} ${status}`;
    // Each series' child is looked up once (prom-client hashes the labels on every call otherwise);
    // operations are the contract's fixed set and statuses a handful, so the map stays small.
    let series = this.series.get(key);
    if (series === undefined) {
      series = { count: this.requests.labels(op, String(status)), time: this.duration.labels(op) };
      this.series.set(key, series);
    }
    series.count.inc();
    series.time.observe(seconds);
  }

  authFailure(area: AuthArea, throttled: boolean): void {
    this.authFailures.inc({ area, reason: throttled ? 'throttled' : 'unauthorized' });
  }
}
