import { createHash, timingSafeEqual } from 'node:crypto';

/** Compare a presented Authorization header with the expected token in constant time. */
export function isAuthorized(header: string | undefined, expected: string): boolean {
  return bearerCheck(expected)(header);
}

/**
 * A check of Authorization headers against one expected token, whose digest is computed once.
 * Digests of equal length: the comparison leaks neither content nor length.
 */
export function bearerCheck(expected: string): (header: string | undefined) => boolean {
  const want = digest(expected);
  return (header) => {
    if (header === undefined || !header.startsWith('Bearer ')) return false;
    const presented = header.slice('Bearer '.length);
    return presented.length > 0 && timingSafeEqual(digest(presented), want);
  };
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

export interface ThrottleOptions {
  /** Failures allowed per window before further failures are refused. */
  maxFailures: number;
  windowMs: number;
  /** Most addresses remembered at once; the oldest is forgotten first. */
  maxAddresses: number;
}

/**
 * Counts failures (authentications, pairing-code redeems) per client address. Only failures are
 * throttled: a request with the right token or a valid code is never refused, so an attacker
 * cannot lock the real caller out.
 */
export class FailureThrottle {
  private readonly windows = new Map<string, { start: number; failures: number }>();

  constructor(
    private readonly options: ThrottleOptions = { maxFailures: 10, windowMs: 60_000, maxAddresses: 10_000 },
    private readonly now: () => number = Date.now,
  ) {}

  /** Record a failure; returns the seconds to wait when this address is over its limit. */
  fail(address: string): { limited: false } | { limited: true; retryAfterSeconds: number } {
    const now = this.now();
    let w = this.windows.get(address);
    if (w === undefined || now - w.start >= this.options.windowMs) {
      this.windows.delete(address);
      w = { start: now, failures: 0 };
      this.evictIfFull(now);
    }
    // Re-insert so Map order stays oldest-window-first for eviction.
    this.windows.delete(address);
    this.windows.set(address, w);
    w.failures += 1;
    if (w.failures <= this.options.maxFailures) return { limited: false };
    return { limited: true, retryAfterSeconds: Math.max(1, Math.ceil((w.start + this.options.windowMs - now) / 1000)) };
  }

  get size(): number {
    return this.windows.size;
  }

  private evictIfFull(now: number): void {
    if (this.windows.size < this.options.maxAddresses) return;
    for (const [address, w] of this.windows) {
      if (now - w.start >= this.options.windowMs || this.windows.size >= this.options.maxAddresses) this.windows.delete(address);
      if (this.windows.size < this.options.maxAddresses) break;
    }
  }
}

/**
 * The admin token's check for pages served outside the API (a platform's own operator pages): the
 * same token, the same limit on failures per address as the API's `/admin/` (10 a minute), 503
 * when no admin token is configured.
 */
export function platformAdminGate(adminToken: string | undefined, onFailure?: (throttled: boolean) => void): (authorization: string | undefined, address: string) => { ok: true } | { ok: false; status: 401 | 429 | 503; error: string; retryAfterSeconds?: number } {
  const check = adminToken === undefined ? undefined : bearerCheck(adminToken);
  const throttle = new FailureThrottle();
  return (authorization, address) => {
    if (check === undefined) return { ok: false, status: 503, error: 'admin not configured: set HERALD_ADMIN_TOKEN' };
    if (check(authorization)) return { ok: true };
    const verdict = throttle.fail(address);
    onFailure?.(verdict.limited);
    return verdict.limited ? { ok: false, status: 429, error: 'too many failed attempts', retryAfterSeconds: verdict.retryAfterSeconds } : { ok: false, status: 401, error: 'unauthorized: the admin token (HERALD_ADMIN_TOKEN)' };
  };
}
