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
  /** reactions.add, reactions.remove, chat.delete: do it, then destroy the connection without answering. */
  dropAnswerAfterAct(method: string, count?: number): void;
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
  private readonly actDrops = new Map<string, number>();
  dropAnswerAfterAct(method: string, count = 1): void {
    this.actDrops.set(method, (this.actDrops.get(method) ?? 0) + count);
  }
  /** Whether this call's answer (a reaction or a delete, done) is to be dropped (counted as used). */
  takeActDrop(method: string): boolean {
    const left = this.actDrops.get(method) ?? 0;
    if (left <= 0) return false;
    this.actDrops.set(method, left - 1);
    return true;
  }
  clear(): void {
    this.drops = 0;
    this.pending.length = 0;
    this.actDrops.clear();
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
  'reactions.add': 3,
  'reactions.remove': 2,
  'chat.delete': 3,
};

/**
 * How early a post may come and still be let through: 0.8 s, or 0.8 of an interval at rates under
 * one a second. Slack allows "about one message per second per channel, short bursts allowed": a
 * post that leaves on time after one the network (or a busy machine) delayed is not refused, but
 * two posts at once (at one a second) are.
 */
const POST_JITTER_MS = 800;

/**
 * Rate limits counted per key. A method's tier: fixed windows of a minute. Posts in a channel: a
 * steady rate with a little slack for jitter (a GCRA: each post moves the channel's next due time
 * one interval on; a post more than 0.8 s early is refused). A fixed one-second window
 * would refuse any client whose two posts, spaced over a second apart, arrive in the same window
 * because the first was delayed in transit, which is not how Slack behaves.
 */
export class RateLimits {
  private readonly windows = new Map<string, { start: number; count: number }>();
  /** Per channel: when its next post is due, in milliseconds (the GCRA's theoretical arrival time). */
  private readonly postsDue = new Map<string, number>();

  constructor(
    private readonly now: () => number,
    private readonly postsPerSecondPerChannel: number,
    private readonly tierScale: number,
  ) {}

  /** Count a call; undefined when admitted, else the seconds to wait (Retry-After). */
  admit(method: string, channel: string | undefined, team = ''): number | undefined {
    if (method === 'chat.postMessage') return channel === undefined ? undefined : this.post(channel);
    const tier = METHOD_TIERS[method];
    if (tier === undefined) return undefined;
    return this.count(team === '' ? method : `${team}:${method}`, Math.max(1, Math.round(TIERS[tier] * this.tierScale)), 60_000);
  }

  private post(channel: string): number | undefined {
    const now = this.now();
    const intervalMs = 1_000 / this.postsPerSecondPerChannel;
    const due = Math.max(this.postsDue.get(channel) ?? now, now);
    const toleranceMs = Math.max(POST_JITTER_MS, intervalMs * 0.8);
    const early = due - now;
    if (early > toleranceMs) return Math.max(1, Math.ceil((early - toleranceMs) / 1000));
    this.postsDue.set(channel, due + intervalMs);
    return undefined;
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
