import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PolicyUsage } from '../src/infra/policy/usage.js';
import { ReadCounter } from '../src/mcp/policy.js';
import { migratedStore, type MigratedStore } from './support/db.js';

// Each principal counts for itself: a store where principals come and go (OAuth clients an issuer
// mints, one per session) must not keep the counts of the ones gone for good.
describe('policy_usage under principals that come and go', () => {
  let fixture: MigratedStore;
  beforeAll(async () => {
    fixture = await migratedStore();
  });
  afterAll(() => fixture?.close());

  it("a principal never seen again has its calls dropped once they are a day old, by another principal's call", async () => {
    const db = fixture.store.db as Kysely<unknown>;
    let now = Date.parse('2026-12-06T10:00:00Z');
    const usage = new PolicyUsage(db, () => now);
    for (let i = 0; i < 20; i++) expect(await usage.take(`client:once-${i}`, 'post_message', `k${i}`, { perMinute: 5 })).toBeUndefined();
    const rows = async (): Promise<number> => Number((await sql<{ n: string | number }>`select count(*) as n from policy_usage where subject like 'client:once-%'`.execute(db)).rows[0]?.n);
    expect(await rows()).toBe(20);
    now += 25 * 60 * 60_000;
    expect(await usage.take('client:still-here', 'post_message', 'k', { perMinute: 5 })).toBeUndefined();
    expect(await rows()).toBe(0);
  });
});

describe("herald mcp's read counts under principals that come and go", () => {
  it('forgets a principal once its calls are a day old, and still counts the ones calling', () => {
    const reads = new ReadCounter();
    let now = Date.parse('2026-12-06T10:00:00Z');
    for (let i = 0; i < 500; i++) expect(reads.take(`client:once-${i}:read_messages`, { perMinute: 1 }, now)).toBeUndefined();
    expect(reads.take('client:steady:read_messages', { perMinute: 1 }, now)).toBeUndefined();
    expect(reads.size).toBe(501);
    now += 23 * 60 * 60_000;
    expect(reads.take('client:steady:read_messages', { perDay: 2 }, now)).toBeUndefined();
    now += 2 * 60 * 60_000;
    // A day and an hour on: only the principal that called within the day is held, and its count still holds.
    expect(reads.take('client:steady:read_messages', { perDay: 2 }, now)).toBeUndefined();
    expect(reads.size).toBe(1);
    expect(reads.take('client:steady:read_messages', { perDay: 2 }, now)).toBe('rate_per_day');
  });
});
