/**
 * How the sandbox misbehaves: injected faults (5xx answers, 429s, a message created but never
 * answered), and Slack's rate limits: chat.postMessage per channel per second, every other
 * method by its tier (calls per minute per method).
 * https://docs.slack.dev/apis/web-api/rate-limits
 */

/** The faults the test face offers (SlackSandbox.faults). */
export interface SlackFaults {
  /** chat.postMessage: create the message, then destroy the connection without answering. */
  dropAnswerAfterCreate(count?: number): void;
  /** Answer this HTTP status without doing anything. */
  failNext(method: string, status: 500 | 503, count?: number): void;
  /** Answer 429 with this Retry-After (seconds) and `ratelimited`, without doing anything. */
  rateLimitNext(method: string, retryAfterSeconds: number, count?: number): void;
  clear(): void;
}

export type Fault = { kind: 'fail'; status: number } | { kind: 'ratelimit'; retryAfter: number };

export class FaultQueue implements SlackFaults {
  private drops = 0;
  private readonly pending: { method: string; fault: Fault; remaining: number }[] = [];

  dropAnswerAfterCreate(count = 1): void {
    this.drops += count;
  }
  failNext(method: string, status: 500 | 503, count = 1): void {
    this.pending.push({ method, fault: { kind: 'fail', status }, remaining: count });
  }
  rateLimitNext(method: string, retryAfterSeconds: number, count = 1): void {
    this.pending.push({ method, fault: { kind: 'ratelimit', retryAfter: retryAfterSeconds }, remaining: count });
  }
  clear(): void {
    this.drops = 0;
    this.pending.length = 0;
  }

  /** The fault for this call, if one is pending, counted as used. */
  take(method: string): Fault | undefined {
    const index = this.pending.findIndex((p) => p.method === method);
    const entry = this.pending[index];
    if (entry === undefined) return undefined;
    entry.remaining -= 1;
    if (entry.remaining <= 0) this.pending.splice(index, 1);
    return entry.fault;
  }

  /** Whether this chat.postMessage's answer is to be dropped (counted as used). */
  takeDrop(): boolean {
    if (this.drops <= 0) return false;
    this.drops -= 1;
    return true;
  }
}

/** Calls per minute of each of Slack's tiers. */
const TIERS = { 1: 1, 2: 20, 3: 50, 4: 100 } as const;

/**
 * Each method's tier, as Slack documents it. One exception: apps.connections.open is Tier 1 on
 * Slack ("1+ per minute", bursts tolerated); here it is Tier 2, so a client reconnecting in a
 * test is not held back a minute.
 */
const METHOD_TIERS: Record<string, keyof typeof TIERS> = {
  'auth.test': 4,
  'chat.update': 3,
  'chat.getPermalink': 4,
  'conversations.history': 3,
  'conversations.replies': 3,
  'conversations.list': 2,
  'conversations.create': 2,
  'conversations.join': 3,
  'conversations.members': 4,
  'conversations.info': 3,
  'conversations.open': 3,
  'users.info': 4,
  'apps.connections.open': 2,
};

/** Fixed windows counted per key: a minute per method, a second per channel for posts. */
export class RateLimits {
  private readonly windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly now: () => number,
    private readonly postsPerSecondPerChannel: number,
    private readonly tierScale: number,
  ) {}

  /** Count a call; undefined when admitted, else the seconds to wait (Retry-After). */
  admit(method: string, channel: string | undefined): number | undefined {
    if (method === 'chat.postMessage') return channel === undefined ? undefined : this.count(`post ${channel}`, this.postsPerSecondPerChannel, 1_000);
    const tier = METHOD_TIERS[method];
    if (tier === undefined) return undefined;
    return this.count(method, Math.max(1, Math.round(TIERS[tier] * this.tierScale)), 60_000);
  }

  private count(key: string, limit: number, windowMs: number): number | undefined {
    const now = this.now();
    let window = this.windows.get(key);
    if (window === undefined || now - window.start >= windowMs) {
      window = { start: now, count: 0 };
      this.windows.set(key, window);
    }
    if (window.count >= limit) return Math.max(1, Math.ceil((window.start + windowMs - now) / 1000));
    window.count += 1;
    return undefined;
  }
}
