import { Counter, Histogram, type Registry } from 'prom-client';
import { addStatusPanels, LATENCY_BUCKETS, type SeriesLabels } from '../../infra/metrics.js';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';

/** Discord's `X-RateLimit-Scope` of a 429, or `unknown` when it sent none. */
export type RateLimitScope = 'user' | 'global' | 'shared' | 'unknown';

/**
 * What the platforms answer, counted in the transports: every HTTP response by method and status
 * (retries discord.js makes on its own included), 429s by scope, and the waits discord.js sits out,
 * each by the bot (identity, src/infra/policy/identity.ts) that made the request: one bot's 429
 * storm shows as its own. Never a route with ids in it.
 */
export class PlatformMetrics {
  private constructor(
    private readonly counters: PlatformCounters,
    /** The bot whose requests this counts (`default`: the platform's own variables'). */
    private readonly identity: string,
  ) {}

  /** The counters of this registry's process, for the default bot (`as` gives another bot's). */
  static create(registry: Registry): PlatformMetrics {
    return new PlatformMetrics(platformCounters(registry), DEFAULT_IDENTITY);
  }

  /** The same counters, for the requests another bot (identity) makes. */
  as(identity: string): PlatformMetrics {
    return new PlatformMetrics(this.counters, identity);
  }

  response(transport: string, method: string, status: number | 'error', seconds: number, scope?: string | null): void {
    const m = method.toUpperCase();
    const { identity } = this;
    this.counters.responses.inc({ transport, method: m, status: String(status), identity });
    this.counters.duration.observe({ transport, method: m }, seconds);
    if (status === 429) this.counters.rateLimited.inc({ transport, scope: rateLimitScope(scope), identity });
  }

  rateLimitWait(transport: string, scope: string): void {
    this.counters.waits.inc({ transport, scope: rateLimitScope(scope), identity: this.identity });
  }
}

interface PlatformCounters {
  readonly responses: Counter<'transport' | 'method' | 'status' | 'identity'>;
  readonly duration: Histogram<'transport' | 'method'>;
  readonly rateLimited: Counter<'transport' | 'scope' | 'identity'>;
  readonly waits: Counter<'transport' | 'scope' | 'identity'>;
}

function platformCounters(registry: Registry): PlatformCounters {
  const registers = [registry];
  const counters: PlatformCounters = {
    responses: new Counter({
      name: 'herald_platform_responses_total',
      help: 'HTTP responses from the chat platform, by transport, method, status (error: no response: timeout, connection lost) and the bot (identity) that asked',
      labelNames: ['transport', 'method', 'status', 'identity'],
      registers,
    }),
    duration: new Histogram({
      name: 'herald_platform_request_duration_seconds',
      help: 'Time one HTTP request to the chat platform took, by transport and method',
      labelNames: ['transport', 'method'],
      buckets: [...LATENCY_BUCKETS],
      registers,
    }),
    rateLimited: new Counter({
      name: 'herald_platform_rate_limited_total',
      help: '429 responses from the chat platform, by transport, rate-limit scope (user, global, shared; unknown when not said) and the bot (identity) that asked',
      labelNames: ['transport', 'scope', 'identity'],
      registers,
    }),
    waits: new Counter({
      name: 'herald_platform_rate_limit_waits_total',
      help: 'Requests the platform client held back to respect a rate limit, by transport, scope and the bot (identity) that waited',
      labelNames: ['transport', 'scope', 'identity'],
      registers,
    }),
  };
  const discord = (l: SeriesLabels) => l['transport'] === 'discord';
  addStatusPanels(
    registry,
    { section: 'discord', title: 'Responses per minute', metric: 'herald_platform_responses_total', show: 'perMinute', where: discord, unit: '/min' },
    { section: 'discord', title: '429s per minute', metric: 'herald_platform_rate_limited_total', show: 'perMinute', where: discord, unit: '/min' },
  );
  return counters;
}

function rateLimitScope(raw: string | null | undefined): RateLimitScope {
  return raw === 'user' || raw === 'global' || raw === 'shared' ? raw : 'unknown';
}
