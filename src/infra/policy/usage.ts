import { sql, type Kysely } from 'kysely';
import type { PolicyRule } from './policy.js';

const MINUTE_MS = 60_000;
const DAY_MS = 24 * 60 * MINUTE_MS;
/** How often a process drops every principal's day-old calls (on a call, not on a timer). */
const SWEEP_EVERY_MS = 10 * MINUTE_MS;

/** A tool's cap under the policy. */
export interface RateCap {
  perMinute?: number;
  perDay?: number;
}

/**
 * The cap that holds when several rules cap the same tool for one caller (the connector's and an
 * OAuth client's own): the lowest of each; undefined when none caps it.
 */
export function strictestCap(caps: readonly (RateCap | undefined)[]): RateCap | undefined {
  const given = caps.filter((c): c is RateCap => c !== undefined);
  if (given.length === 0) return undefined;
  const lowest = (k: keyof RateCap): number | undefined => given.reduce<number | undefined>((m, c) => (c[k] === undefined ? m : Math.min(m ?? Infinity, c[k])), undefined);
  const perMinute = lowest('perMinute');
  const perDay = lowest('perDay');
  return { ...(perMinute === undefined ? {} : { perMinute }), ...(perDay === undefined ? {} : { perDay }) };
}

/**
 * Counts calls against the policy's rate caps in the store (table policy_usage), so every replica
 * counts against the same cap. A call is written first and counted after: two replicas racing for
 * the last call may both be refused, never both let through.
 */
export class PolicyUsage {
  /** When this process last dropped every principal's day-old calls (NaN: not yet). */
  private sweptAt = Number.NaN;

  constructor(
    private readonly db: Kysely<unknown>,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Count one call of `tool` by `subject` (the same `key` again is the same call, counted once) and
   * answer the cap it would go over, with the seconds until a call is free again; nothing when it fits.
   */
  async take(subject: string, tool: string, key: string, cap: RateCap): Promise<{ rule: PolicyRule; retryAfterSeconds: number } | undefined> {
    const db = this.db as Kysely<PolicyUsageTables>;
    const now = this.now();
    const dayAgo = new Date(now - DAY_MS);
    const minuteAgo = new Date(now - MINUTE_MS);
    await db.deleteFrom('policy_usage').where('subject', '=', subject).where('tool', '=', tool).where('at', '<=', dayAgo).execute();
    // Principals come and go (an OAuth client an issuer minted for one session): every so often, the
    // day-old calls of all of them go too, not only this caller's, so the table holds about a day of calls.
    if (!(now - this.sweptAt < SWEEP_EVERY_MS)) {
      this.sweptAt = now;
      await db.deleteFrom('policy_usage').where('at', '<=', dayAgo).execute();
    }
    const inserted = await db.insertInto('policy_usage').values({ subject, tool, key, at: new Date(now) }).onConflict((oc) => oc.doNothing()).returning('key').executeTakeFirst();
    if (inserted === undefined) return undefined; // a retry of a call already counted
    const row = await sql<{ minute: string | number; day: string | number; oldest_minute: Date | string | null; oldest_day: Date | string | null }>`
      select count(*) filter (where at > ${minuteAgo}) as minute, count(*) as day,
             min(at) filter (where at > ${minuteAgo}) as oldest_minute, min(at) as oldest_day
      from policy_usage where subject = ${subject} and tool = ${tool} and at > ${dayAgo}`.execute(db);
    const counts = row.rows[0];
    const over = (n: number | undefined, seen: string | number | undefined): boolean => n !== undefined && Number(seen ?? 0) > n;
    const wait = (oldest: Date | string | null | undefined, windowMs: number): number => Math.max(1, Math.ceil((new Date(oldest ?? now).getTime() + windowMs - now) / 1000));
    const refused = over(cap.perDay, counts?.day)
      ? { rule: 'rate_per_day' as const, retryAfterSeconds: wait(counts?.oldest_day, DAY_MS) }
      : over(cap.perMinute, counts?.minute)
        ? { rule: 'rate_per_minute' as const, retryAfterSeconds: wait(counts?.oldest_minute, MINUTE_MS) }
        : undefined;
    // A refused call is not a call: it does not use up the cap.
    if (refused !== undefined) await db.deleteFrom('policy_usage').where('subject', '=', subject).where('tool', '=', tool).where('key', '=', key).execute();
    return refused;
  }
}

interface PolicyUsageTables {
  policy_usage: { subject: string; tool: string; key: string; at: Date };
}
