import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { deliveryQueue } from '../../src/modules/deliveries/delivery.jobs.js';
import { claimDue, finishAttempt } from '../../src/modules/deliveries/delivery.repository.js';
import type { DeliveriesDb } from '../../src/modules/deliveries/delivery.table.js';
import { openStore } from '../../src/infra/db/database.js';

/**
 * `npm run bench -- --only=vacuum` (PostgreSQL only): the outbox's claim throughput while a long
 * transaction holds back vacuum. Herald's own claim and finish (claimDue, finishAttempt of
 * src/modules/deliveries/delivery.repository.ts, the leased-table statements of
 * src/outbox/leased-table.ts) run by WORKERS loops of a dispatcher's default concurrency, each
 * claimed delivery finished as delivered at once (no platform: the database is what is measured),
 * while a feeder keeps BACKLOG deliveries pending and CHURN_PER_S more go through in bulk. First a
 * baseline with nothing held; then another connection opens `BEGIN ISOLATION LEVEL REPEATABLE
 * READ; SELECT 1` and keeps it open while the same load runs, so no dead row version left by a
 * claim or a finish can be vacuumed. Two rounds: every claim over the whole due range (claimDue
 * without a cursor, the claim before src/outbox/leased-table.ts had one, and with
 * HERALD_CLAIM_SWEEP_MS=0), then Herald's delivery queue (deliveryQueue, its cursor at the default
 * sweep). Reported for each: claims/s of the baseline, of the held period's first and last
 * seconds, their ratios to the baseline, the mean time of one claim, the dead tuples
 * (pg_stat_user_tables.n_dead_tup) and the claim's plan and time (EXPLAIN ANALYZE of its due-row
 * select) at the end of each period.
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
/**
 * Besides: deliveries of another kind (dm) taken through the same states in three bulk statements
 * a second (inserted pending, claimed, delivered), as a busier outbox's other dispatchers would,
 * so the dead row versions reach the hundreds of thousands on a machine of 2 cores.
 */
const CHURN_PER_S = 5_000;

export async function vacuumPhase(databaseUrl: string, quick: boolean): Promise<Record<string, number | string>> {
  const baselineS = quick ? 8 : 20;
  const heldS = quick ? 15 : 60;
  const store = await openStore<DeliveriesDb>({ databaseUrl, dataDir: '', poolSize: WORKERS + 2 });
  try {
    // First every claim over the whole due range (the claim without a cursor), then Herald's queue.
    const whole = await round(store.db, databaseUrl, baselineS, heldS, false);
    const herald = await round(store.db, databaseUrl, baselineS, heldS, true);
    const row: Record<string, number | string> = {};
    for (const [name, r] of [['whole range', whole], ['herald', herald]] as const) {
      for (const [k, v] of Object.entries(r)) row[`vacuum ${name}: ${k}`] = v;
    }
    return row;
  } finally {
    await store.close();
  }
}

/** One baseline and held period; `cursor`: claim through Herald's delivery queue (deliveryQueue), else claimDue over the whole due range. */
async function round(db: Kysely<DeliveriesDb>, databaseUrl: string, baselineS: number, heldS: number, cursor: boolean): Promise<Record<string, number | string>> {
  const holder = new pg.Client({ connectionString: databaseUrl });
  let holding = false;
  try {
    await holder.connect();
    await sql`truncate deliveries`.execute(db);
    await sql`vacuum analyze deliveries`.execute(db);
    /** Claimed deliveries, claims and ms spent claiming, per whole second since the load began. */
    const perSecond: { jobs: number; claims: number; ms: number }[] = [];
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
          select md5(${randomUUID()} || g), 'post', '{"guild_id":"1","destination":"alerts"}', json_build_object('content', 'vacuum bench ' || md5(${randomUUID()} || g)), md5(g::text), 'pending', now(), now()
          from generate_series(1, ${INSERT_BATCH}) g`.execute(db);
        inserted += INSERT_BATCH;
      }
    };
    const work = async () => {
      const owner = `vacuum-bench-${randomUUID()}`;
      // Each loop as one dispatcher process: a queue (and so a cursor) of its own.
      const queue = deliveryQueue(db);
      while (!stopping) {
        const started = performance.now();
        const jobs = cursor ? (await queue.claim(owner, new Date(), LEASE_MS, ['post'], CLAIM_LIMIT)).map((j) => j.row) : await claimDue(db, owner, new Date(), LEASE_MS, ['post'], CLAIM_LIMIT);
        const ms = performance.now() - started;
        if (jobs.length === 0) {
          await new Promise((r) => setTimeout(r, 5));
          continue;
        }
        await Promise.all(jobs.map((j) => finishAttempt(db, j.request_id, { owner, token: j.lease_token }, { status: 'delivered', channel_id: '1', message_id: '1', url: null, reason: null })));
        claimed += jobs.length;
        const s = (perSecond[second()] ??= { jobs: 0, claims: 0, ms: 0 });
        s.jobs += jobs.length;
        s.claims += 1;
        s.ms += ms;
      }
    };
    let churned = 0;
    const churn = async () => {
      while (!stopping) {
        const tick = performance.now();
        const batch = randomUUID();
        const ids = (
          await sql<{ request_id: string }>`
            insert into deliveries (request_id, kind, target, body, payload_hash, status, created_at, next_attempt_at)
            select md5(${batch} || g), 'dm', '{"user_id":"1"}', json_build_object('content', 'vacuum bench ' || md5(${batch} || g)), md5(g::text), 'pending', now(), now()
            from generate_series(1, ${CHURN_PER_S}) g returning request_id`.execute(db)
        ).rows.map((r) => r.request_id);
        await sql`update deliveries set status = 'in_flight', lease_owner = 'churn', lease_expires_at = now() + interval '1 hour', attempts = 1 where request_id = any(${ids})`.execute(db);
        await sql`update deliveries set status = 'delivered', lease_owner = null, lease_expires_at = null where request_id = any(${ids})`.execute(db);
        churned += ids.length;
        await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (performance.now() - tick))));
      }
    };
    const load = Promise.all([feed(), churn(), ...Array.from({ length: WORKERS }, work)]);
    /** Jobs per second and the mean ms of one claim over whole seconds [from, to). */
    const window = (from: number, to: number) => {
      let jobs = 0;
      let claims = 0;
      let ms = 0;
      for (let s = from; s < to; s++) {
        jobs += perSecond[s]?.jobs ?? 0;
        claims += perSecond[s]?.claims ?? 0;
        ms += perSecond[s]?.ms ?? 0;
      }
      return { rate: Math.round(jobs / Math.max(1, to - from)), claimMs: Math.round((ms / Math.max(1, claims)) * 100) / 100 };
    };
    let failed: unknown;
    load.catch((err: unknown) => (failed = err));
    const sleep = async (s: number) => {
      await new Promise((r) => setTimeout(r, s * 1000));
      if (failed !== undefined) throw failed;
    };
    try {
      await sleep(baselineS);
      const baselineEnd = second();
      const before = await measure(db, cursor);
      await holder.query('begin isolation level repeatable read');
      await holder.query('select 1');
      holding = true;
      const heldStart = second() + 1;
      await sleep(heldS);
      const heldEnd = second();
      const after = await measure(db, cursor);
      stopping = true;
      await load;
      // The baseline after a 2 s warm-up; the held period's first and last WINDOW_S whole seconds.
      const baseline = window(2, baselineEnd);
      const start = window(heldStart, heldStart + WINDOW_S);
      const end = window(heldEnd - WINDOW_S, heldEnd);
      const ratio = (x: number) => Math.round((x / Math.max(1, baseline.rate)) * 100) / 100;
      const name = cursor ? "Herald's delivery queue (a cursor under a backlog)" : 'every claim over the whole due range';
      console.log(`  ${name}, ${WORKERS} loops × ${CLAIM_LIMIT}, ${churned} dm churned in bulk:`);
      console.log(`    claims/s baseline ${baseline.rate} (one claim ${baseline.claimMs} ms); vacuum held back ${heldS} s: first ${WINDOW_S} s ${start.rate} (${ratio(start.rate)}×, ${start.claimMs} ms), last ${WINDOW_S} s ${end.rate} (${ratio(end.rate)}×, ${end.claimMs} ms)`);
      console.log(`    dead tuples in deliveries: ${before.dead} before, ${after.dead} at the end (${after.live} live); due select ${before.ms} ms → ${after.ms} ms, ${before.buffers} → ${after.buffers} buffers`);
      console.log(`    due select's plan at the end:\n${after.plan.replace(/^/gm, '      ')}`);
      return {
        'claims/s baseline': baseline.rate,
        'claims/s held, first 5 s': start.rate,
        'claims/s held, last 5 s': end.rate,
        'held first ÷ baseline': ratio(start.rate),
        'held last ÷ baseline': ratio(end.rate),
        'claim ms baseline': baseline.claimMs,
        'claim ms held, last 5 s': end.claimMs,
        'held s': heldS,
        'dead tuples at end': after.dead,
        'due select ms held': after.ms,
        'due select buffers held': after.buffers,
        'due select plan': after.scan,
      };
    } finally {
      stopping = true;
      await load.catch(() => undefined);
    }
  } finally {
    if (holding) await holder.query('rollback').catch(() => undefined);
    await holder.end().catch(() => undefined);
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

/**
 * The dead tuples now, and the claim's due-row select (as src/outbox/leased-table.ts writes it), run
 * and rolled back: over the whole due range, or (`cursor`) from the oldest pending row on, as a
 * claim with a cursor reads.
 */
async function measure(db: Kysely<DeliveriesDb>, cursor: boolean): Promise<Measured> {
  // The statistics are sent at the end of each transaction, at most once a second.
  await new Promise((r) => setTimeout(r, 1_100));
  const stats = await sql<{ dead: string; live: string }>`select n_dead_tup as dead, n_live_tup as live from pg_stat_user_tables where relname = 'deliveries'`.execute(db);
  const now = new Date();
  const oldest = cursor ? (await sql<{ at: Date }>`select min(next_attempt_at) as at from deliveries where status = 'pending'`.execute(db)).rows[0]?.at : undefined;
  const due =
    oldest instanceof Date
      ? sql`status = 'pending' and next_attempt_at >= ${oldest} and next_attempt_at <= ${now}`
      : sql`(status = 'pending' and next_attempt_at <= ${now}) or (status = 'in_flight' and lease_expires_at <= ${now})`;
  const plan = await db.connection().execute(async (c) => {
    await sql`begin`.execute(c);
    try {
      const r = await sql<{ 'QUERY PLAN': string }>`
        explain (analyze, buffers)
        select request_id, status as claimed_from from deliveries
        where (${due}) and (kind in ('post'))
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
