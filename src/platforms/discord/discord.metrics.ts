import { Counter, Histogram, type Registry } from 'prom-client';
import { addStatusPanels, LATENCY_BUCKETS, type SeriesLabels } from '../../infra/metrics.js';

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
