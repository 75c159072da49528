import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { claimDue, finishAttempt } from '../../src/modules/deliveries/delivery.repository.js';
import type { DeliveriesDb } from '../../src/modules/deliveries/delivery.table.js';
import { openStore } from '../../src/platform/db/database.js';

/**
 * `npm run bench -- --only=vacuum` (PostgreSQL only): the outbox's claim throughput while a long
 * transaction holds back vacuum. Herald's own claim and finish (claimDue, finishAttempt of
 * src/modules/deliveries/delivery.repository.ts, the leased-table statements of
 * src/outbox/leased-table.ts) run by WORKERS loops of a dispatcher's default concurrency, each
 * claimed delivery finished as delivered at once (no platform: the database is what is measured),
 * while a feeder keeps BACKLOG deliveries pending. First a baseline with nothing held; then another
 * connection opens `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1` and keeps it open while the
 * same load runs, so no dead row version left by a claim or a finish can be vacuumed.
 * Reported: claims/s of the baseline, of the held period's first and last seconds, their ratios to
 * the baseline, the dead tuples (pg_stat_user_tables.n_dead_tup) and the claim's plan and time
 * (EXPLAIN ANALYZE of its due-row select) at the end of each period.
 */

/** Claim loops, and the claim size of each (HERALD_DISPATCH_CONCURRENCY's default, src/config.ts). */
const WORKERS = 4;
const CLAIM_LIMIT = 8;
/** Deliveries kept pending ahead of the claims, inserted INSERT_BATCH at a time. */
const BACKLOG = 4_000;
const INSERT_BATCH = 1_000;
/** The seconds at each end of the held period that are compared with the baseline. */
const WINDOW_S = 5;
const LEASE_MS = 60_000;

export async function vacuumPhase(databaseUrl: string, quick: boolean): Promise<Record<string, number | string>> {
  const baselineS = quick ? 8 : 20;
  const heldS = quick ? 15 : 60;
  const store = await openStore<DeliveriesDb>({ databaseUrl, dataDir: '', poolSize: WORKERS + 2 });
  const holder = new pg.Client({ connectionString: databaseUrl });
  let holding = false;
  const db = store.db;
  try {
    await holder.connect();
    await sql`truncate deliveries`.execute(db);
    await sql`vacuum analyze deliveries`.execute(db);
    /** Claimed deliveries per whole second since the load began. */
    const perSecond: number[] = [];
    let inserted = 0;
    let claimed = 0;
    let stopping = false;
    const t0 = performance.now();
    const second = () => Math.floor((performance.now() - t0) / 1000);
    const feed = async () => {
      while (!stopping) {
        if (inserted - claimed >= BACKLOG) {
          await new Promise((r) => setTimeout(r, 5));
          continue;
        }
        await sql`
          insert into deliveries (request_id, kind, target, body, payload_hash, status, created_at, next_attempt_at)
          select md5(${randomUUID()} || g), 'post', '{"guild_id":"1","destination":"alerts"}', '{"content":"vacuum bench"}', md5(g::text), 'pending', now(), now()
          from generate_series(1, ${INSERT_BATCH}) g`.execute(db);
        inserted += INSERT_BATCH;
      }
    };
    const work = async () => {
      const owner = `vacuum-bench-${randomUUID()}`;
      while (!stopping) {
        const jobs = await claimDue(db, owner, new Date(), LEASE_MS, ['post'], CLAIM_LIMIT);
        if (jobs.length === 0) {
          await new Promise((r) => setTimeout(r, 5));
          continue;
        }
        await Promise.all(jobs.map((j) => finishAttempt(db, j.request_id, owner, { status: 'delivered', channel_id: '1', message_id: '1', url: null, reason: null })));
        claimed += jobs.length;
        const s = second();
        perSecond[s] = (perSecond[s] ?? 0) + jobs.length;
      }
    };
    const load = Promise.all([feed(), ...Array.from({ length: WORKERS }, work)]);
    const rate = (from: number, to: number) => {
      let n = 0;
      for (let s = from; s < to; s++) n += perSecond[s] ?? 0;
      return Math.round(n / Math.max(1, to - from));
    };
    let failed: unknown;
    load.catch((err: unknown) => (failed = err));
    const sleep = async (s: number) => {
      await new Promise((r) => setTimeout(r, s * 1000));
      if (failed !== undefined) throw failed;
    };
    let before: Measured;
    let after: Measured;
    try {
      await sleep(baselineS);
      const baselineEnd = second();
      before = await measure(db);
      await holder.query('begin isolation level repeatable read');
      await holder.query('select 1');
      holding = true;
      const heldStart = second() + 1;
      await sleep(heldS);
      const heldEnd = second();
      after = await measure(db);
      stopping = true;
      await load;
      // The baseline after a 2 s warm-up; the held period's first and last WINDOW_S whole seconds.
      const baseline = rate(2, baselineEnd);
      const start = rate(heldStart, heldStart + WINDOW_S);
      const end = rate(heldEnd - WINDOW_S, heldEnd);
      const ratio = (x: number) => Math.round((x / Math.max(1, baseline)) * 100) / 100;
      console.log(`  claims/s (${WORKERS} loops × ${CLAIM_LIMIT}, Herald's claim and finish): baseline ${baseline}; vacuum held back ${heldS} s: first ${WINDOW_S} s ${start} (${ratio(start)}×), last ${WINDOW_S} s ${end} (${ratio(end)}×)`);
      console.log(`  dead tuples in deliveries: ${before.dead} before, ${after.dead} at the end (${after.live} live); claim select ${before.ms} ms → ${after.ms} ms, ${before.buffers} → ${after.buffers} buffers`);
      console.log(`  claim plan at the end:\n${after.plan.replace(/^/gm, '    ')}`);
      return {
        'vacuum claims/s baseline': baseline,
        'vacuum claims/s held, first 5 s': start,
        'vacuum claims/s held, last 5 s': end,
        'vacuum held first ÷ baseline': ratio(start),
        'vacuum held last ÷ baseline': ratio(end),
        'vacuum held s': heldS,
        'vacuum dead tuples at end': after.dead,
        'vacuum claim select ms baseline': before.ms,
        'vacuum claim select ms held': after.ms,
        'vacuum claim select buffers held': after.buffers,
        'vacuum claim plan': after.scan,
      };
    } finally {
      stopping = true;
      await load.catch(() => undefined);
    }
  } finally {
    if (holding) await holder.query('rollback').catch(() => undefined);
    await holder.end().catch(() => undefined);
    await store.close();
  }
}

interface Measured {
  dead: number;
  live: number;
  ms: number;
  buffers: number;
  plan: string;
  /** The scan nodes of the plan, e.g. "Index Scan deliveries_due". */
  scan: string;
}

/** The dead tuples now, and the claim's due-row select (as src/outbox/leased-table.ts writes it), run and rolled back. */
async function measure(db: Kysely<DeliveriesDb>): Promise<Measured> {
  // The statistics are sent at the end of each transaction, at most once a second.
  await new Promise((r) => setTimeout(r, 1_100));
  const stats = await sql<{ dead: string; live: string }>`select n_dead_tup as dead, n_live_tup as live from pg_stat_user_tables where relname = 'deliveries'`.execute(db);
  const now = new Date();
  const plan = await db.connection().execute(async (c) => {
    await sql`begin`.execute(c);
    try {
      const r = await sql<{ 'QUERY PLAN': string }>`
        explain (analyze, buffers)
        select request_id, status as claimed_from from deliveries
        where ((status = 'pending' and next_attempt_at <= ${now}) or (status = 'in_flight' and lease_expires_at <= ${now})) and (kind in ('post'))
        order by next_attempt_at limit ${CLAIM_LIMIT} for update skip locked`.execute(c);
      return r.rows.map((x) => x['QUERY PLAN']).join('\n');
    } finally {
      await sql`rollback`.execute(c);
    }
  });
  const ms = Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? NaN);
  const buffers = [...plan.matchAll(/Buffers: shared hit=(\d+)(?: read=(\d+))?/g)].reduce((m, x) => Math.max(m, Number(x[1]) + Number(x[2] ?? 0)), 0);
  const scan = [...plan.matchAll(/((?:Index|Bitmap Index|Bitmap Heap|Seq|Index Only) Scan)(?: Backward)?(?: using| on) (\w+)/g)].map((x) => `${x[1]} ${x[2]}`).join(', ');
  return { dead: Number(stats.rows[0]?.dead ?? 0), live: Number(stats.rows[0]?.live ?? 0), ms, buffers, plan, scan };
}
