import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { addStatusPanels, LATENCY_BUCKETS, type SeriesLabels } from '../../platform/metrics.js';

/** Discord's `X-RateLimit-Scope` of a 429, or `unknown` when it sent none. */
export type RateLimitScope = 'user' | 'global' | 'shared' | 'unknown';

/**
 * What the platforms answer, counted in the transports: every HTTP response by method and status
 * (retries discord.js makes on its own included), 429s by scope, and the waits discord.js sits out.
 * Never a route with ids in it.
 */
export class PlatformMetrics {
  private readonly responses: Counter<'transport' | 'method' | 'status'>;
  private readonly duration: Histogram<'transport' | 'method'>;
  private readonly rateLimited: Counter<'transport' | 'scope'>;
  private readonly waits: Counter<'transport' | 'scope'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.responses = new Counter({
      name: 'herald_platform_responses_total',
      help: 'HTTP responses from the chat platform, by transport, method and status (error: no response: timeout, connection lost)',
      labelNames: ['transport', 'method', 'status'],
      registers,
    });
    this.duration = new Histogram({
      name: 'herald_platform_request_duration_seconds',
      help: 'Time one HTTP request to the chat platform took, by transport and method',
      labelNames: ['transport', 'method'],
      buckets: [...LATENCY_BUCKETS],
      registers,
    });
    this.rateLimited = new Counter({
      name: 'herald_platform_rate_limited_total',
      help: '429 responses from the chat platform, by transport and rate-limit scope (user, global, shared; unknown when not said)',
      labelNames: ['transport', 'scope'],
      registers,
    });
    this.waits = new Counter({
      name: 'herald_platform_rate_limit_waits_total',
      help: 'Requests the platform client held back to respect a rate limit, by transport and scope',
      labelNames: ['transport', 'scope'],
      registers,
    });
    const discord = (l: SeriesLabels) => l['transport'] === 'discord';
    addStatusPanels(
      registry,
      { section: 'discord', title: 'Responses per minute', metric: 'herald_platform_responses_total', show: 'perMinute', where: discord, unit: '/min' },
      { section: 'discord', title: '429s per minute', metric: 'herald_platform_rate_limited_total', show: 'perMinute', where: discord, unit: '/min' },
    );
  }

  response(transport: string, method: string, status: number | 'error', seconds: number, scope?: string | null): void {
    const m = method.toUpperCase();
    this.responses.inc({ transport, method: m, status: String(status) });
    this.duration.observe({ transport, method: m }, seconds);
    if (status === 429) this.rateLimited.inc({ transport, scope: rateLimitScope(scope) });
  }

  rateLimitWait(transport: string, scope: string): void {
    this.waits.inc({ transport, scope: rateLimitScope(scope) });
  }
}

function rateLimitScope(raw: string | null | undefined): RateLimitScope {
  return raw === 'user' || raw === 'global' || raw === 'shared' ? raw : 'unknown';
}

/**
 * Whether each long-lived platform link (Discord's gateway, an IRC connection) is up: 1 or 0,
 * read from the link itself at scrape time.
 */
export class LinkMetrics {
  private readonly links = new Map<string, () => boolean>();

  constructor(private readonly registry: Registry) {
    const links = this.links;
    new Gauge({
      name: 'herald_transport_link_up',
      help: 'Whether a platform link this process holds is connected (1) or not (0), by transport and link',
      labelNames: ['transport', 'link'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [key, up] of links) {
          const [transport = '', link = ''] = key.split('\u0000');
          this.set({ transport, link }, up() ? 1 : 0);
        }
      },
    });
  }

  /** Report a link this process holds; `up` is asked at every scrape (and shown on the status page under its transport). */
  track(transport: string, link: string, up: () => boolean): void {
    this.links.set(`${transport}\u0000${link}`, up);
    addStatusPanels(this.registry, {
      section: transport,
      title: `${link} link`,
      metric: 'herald_transport_link_up',
      show: 'up',
      where: (l) => l['transport'] === transport && l['link'] === link,
    });
  }
}
