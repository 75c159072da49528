import type { Context } from 'koa';

/**
 * How the sandbox misbehaves on purpose: injected faults (errors, delays, messages created but
 * not answered), and Discord's rate limits (per route and channel, plus an optional global
 * limit) answered with 429s as Discord answers them.
 */

const FAULT_ACTIONS = ['error', 'delay', 'drop_after_create', 'delay_after_create', 'error_after_create'] as const;

export interface Fault {
  /** Method to match, e.g. POST; any when absent. */
  method?: string;
  /** Regular expression over the path after /api/v10, e.g. "^/channels/[0-9]+/messages$". */
  path?: string;
  /**
   * error: answer `status` with Discord's error `code`; delay: wait `ms`, then handle;
   * drop_after_create: create the message, then close the connection without answering;
   * delay_after_create: create the message, then wait `ms` before answering;
   * error_after_create: create the message, then answer `status` (default 500) as if it failed.
   */
  action: (typeof FAULT_ACTIONS)[number];
  status?: number;
  code?: number;
  ms?: number;
  /** How many matching requests it applies to (default 1). */
  times?: number;
}

/** The faults injected and not yet used up, first injected first matched. */
export class Faults {
  private readonly pending: (Fault & { remaining: number })[] = [];

  /** Make the next matching requests misbehave. */
  inject(fault: Fault): void {
    this.pending.push({ ...fault, remaining: fault.times ?? 1 });
  }
  clear(): void {
    this.pending.length = 0;
  }

  /** The fault that applies to this request, if any, counted as used once more. */
  take(method: string, path: string): Fault | undefined {
    const index = this.pending.findIndex((f) => (f.method === undefined || f.method.toUpperCase() === method) && (f.path === undefined || new RegExp(f.path).test(path)));
    if (index < 0) return undefined;
    const fault = this.pending[index];
    if (fault === undefined) return undefined;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.pending.splice(index, 1);
    return fault;
  }
}

/** Why a fault posted to the control API cannot be injected, if it cannot. */
export function faultProblem(f: Record<string, unknown>): string | undefined {
  if (Array.isArray(f)) return 'expected a fault object';
  if (typeof f['action'] !== 'string' || !(FAULT_ACTIONS as readonly string[]).includes(f['action'])) return `action must be one of ${FAULT_ACTIONS.join(', ')}`;
  if (f['method'] !== undefined && (typeof f['method'] !== 'string' || !/^[A-Za-z]{1,10}$/.test(f['method']))) return 'method must be an HTTP method';
  if (f['path'] !== undefined) {
    if (typeof f['path'] !== 'string' || f['path'].length > 200) return 'path must be a regular expression of at most 200 characters';
    try {
      new RegExp(f['path']);
    } catch {
      return 'path is not a valid regular expression';
    }
  }
  for (const key of ['status', 'code', 'ms', 'times'] as const) {
    const v = f[key];
    if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 600_000)) return `${key} must be an integer from 0 to 600000`;
  }
  if (f['status'] !== undefined && ((f['status'] as number) < 100 || (f['status'] as number) > 599)) return 'status must be an HTTP status';
  return undefined;
}

export interface RateLimitRule {
  limit: number;
  windowMs: number;
}

/**
 * Discord-style buckets: per route and channel, plus an optional global limit; each bot (token) has
 * its own, as on Discord, so one bot's flood never answers another bot 429.
 */
export class RateLimits {
  private readonly buckets = new Map<string, { start: number; count: number }>();
  private readonly globalBuckets = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly routeLimit: RateLimitRule,
    private readonly globalLimit: RateLimitRule | undefined,
  ) {}

  /** Count a request (path after /api/v10) of a bot (its id) and set its rate limit headers; false when it was answered 429. */
  admit(ctx: Context, path: string, botId: string): boolean {
    const now = Date.now();
    const global = this.globalLimit;
    if (global !== undefined) {
      let mine = this.globalBuckets.get(botId);
      if (mine === undefined || now - mine.start >= global.windowMs) this.globalBuckets.set(botId, (mine = { start: now, count: 0 }));
      if (mine.count >= global.limit) {
        ctx.set('X-RateLimit-Global', 'true');
        return rateLimited(ctx, (mine.start + global.windowMs - now) / 1000, 'global');
      }
      mine.count += 1;
    }
    const rule = this.routeLimit;
    const route = `${ctx.method} ${path.replace(/\/messages\/[0-9]+/, '/messages/:id')}`;
    const key = `${botId} ${route}`;
    let bucket = this.buckets.get(key);
    if (bucket === undefined || now - bucket.start >= rule.windowMs) {
      bucket = { start: now, count: 0 };
      this.buckets.set(key, bucket);
    }
    const resetAfter = (bucket.start + rule.windowMs - now) / 1000;
    ctx.set('X-RateLimit-Limit', String(rule.limit));
    ctx.set('X-RateLimit-Reset', String((bucket.start + rule.windowMs) / 1000));
    ctx.set('X-RateLimit-Reset-After', resetAfter.toFixed(3));
    ctx.set('X-RateLimit-Bucket', Buffer.from(route).toString('base64url').slice(0, 32));
    if (bucket.count >= rule.limit) {
      ctx.set('X-RateLimit-Remaining', '0');
      return rateLimited(ctx, resetAfter, 'user');
    }
    bucket.count += 1;
    ctx.set('X-RateLimit-Remaining', String(rule.limit - bucket.count));
    return true;
  }
}

/** https://discord.com/developers/docs/topics/rate-limits#exceeding-a-rate-limit */
function rateLimited(ctx: Context, retryAfterSeconds: number, scope: 'global' | 'user'): false {
  ctx.set('X-RateLimit-Scope', scope);
  ctx.set('Retry-After', String(Math.ceil(retryAfterSeconds)));
  ctx.status = 429;
  ctx.body = { message: 'You are being rate limited.', retry_after: retryAfterSeconds, global: scope === 'global' };
  return false;
}
