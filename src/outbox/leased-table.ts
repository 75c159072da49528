import { sql, type Kysely, type RawBuilder } from 'kysely';
import { faultPoint } from '../infra/faults/fault-points.js';
import { brokenFence } from '../infra/faults/fence.js';
import { DEEP_SCAN_DEPTH, SCAN_DEPTH, type LaneRoom } from './lanes.js';
import type { Lease } from './worker.js';

/**
 * A table whose rows are their own outbox entries, described once: which rows are due, what a
 * claim and a release write besides the lease. Every queue (deliveries, chat sends, archive
 * scrapes) claims, finishes under its lease, releases and prunes with the same four statements.
 */
export interface LeasedTableSpec {
  table: string;
  /** The key column. */
  key: string;
  /** Due rows are claimed oldest first by this column. */
  orderBy: string;
  /** Which rows are due at `now` (a pending row whose time came, a lease that expired). */
  due(now: Date): RawBuilder<unknown>;
  /**
   * The pending rows due at `now` whose `orderBy` is `from` or later: one range of the index on
   * `orderBy`, no OR (see ClaimCursor). Absent: every claim reads the whole due range.
   */
  dueFrom?(now: Date, from: Date): RawBuilder<unknown>;
  /** What a claim sets besides the lease and the attempt count (SQL, may read the row). */
  onClaim?(now: Date): Record<string, RawBuilder<unknown>>;
  /** A column whose value before the claim is returned as `claimed_from` (e.g. the status). */
  claimedFrom?: string;
  /** Which rows a lease is finished or released on besides its owner (e.g. status = in_flight). */
  held?: RawBuilder<unknown>;
  /** What a release sets besides clearing the lease (making the row due now). */
  onRelease(now: Date): Record<string, RawBuilder<unknown>>;
  /** The column prune compares with its cutoff. */
  createdAt?: string;
  /**
   * A row's lane (SQL, text; null: none): what paces its job's sends together. With it, a claim
   * given the worker's lanes is fair across them (src/outbox/lanes.ts) and each row claimed says
   * its `lane`. Absent: rows have no lane. The claim evaluates it on every due row it looks at, so
   * it must not be able to fail on one row's content: read a json column's fields with `jsonText`.
   */
  lane?: RawBuilder<unknown>;
}

/**
 * `column->>'key'`, never failing on the row's content: null where the json text holds a `\u`
 * escape. A `json` column keeps its text as written, and `->>` turns the escapes of the whole
 * document into text: `\u0000`, or a lone surrogate's `\ud800`, then fails the statement, on this
 * row and so for every row a claim reads (one stored chat channel `#a\ud800` once held every
 * delivery `pending` for good). Herald's own JSON has a `\u` escape only for a control character
 * or a lone surrogate (JSON.stringify), which its input gate refuses (src/infra/contract/storable.ts).
 */
export function jsonText(column: string, key: string): RawBuilder<string | null> {
  return sql<string | null>`(case when strpos(${sql.ref(column)}::text, ${'\\u'}) = 0 then ${sql.ref(column)}->>${sql.lit(key)} end)`;
}

/** A claimed row: what the claim read before (`claimedFrom`) and its lane (`lane` in the spec). */
export type Claimed<Row> = Row & { claimed_from?: string; lane?: string | null };

/** The leased-table queue over one table: claim, finish under the lease, release, prune. */
export class LeasedTable<Row> {
  constructor(
    private readonly db: Kysely<unknown>,
    private readonly spec: LeasedTableSpec,
  ) {}

  /**
   * Lease up to `limit` due rows (`FOR UPDATE SKIP LOCKED`: any number of workers share the
   * table) and count the attempt. `where` narrows which rows (e.g. the kinds a worker runs);
   * `cursor`, under a backlog, starts the claim past the rows its scope already claimed; `lanes`
   * (with a `lane` in the spec) makes the claim fair across lanes. Rows come oldest first.
   */
  async claim(owner: string, now: Date, leaseMs: number, limit: number, where?: RawBuilder<unknown>, cursor?: { at: ClaimCursor; scope: string }, lanes?: LaneRoom): Promise<Claimed<Row>[]> {
    const { dueFrom, orderBy } = this.spec;
    const fair = this.spec.lane !== undefined ? lanes : undefined;
    const from = dueFrom !== undefined ? cursor?.at.from(cursor.scope, now) : undefined;
    if (cursor === undefined || dueFrom === undefined) return (await this.claimWhere(this.spec.due(now), owner, now, leaseMs, limit, where, fair)).rows;
    const first = from !== undefined ? await this.claimWhere(dueFrom(now, from), owner, now, leaseMs, limit, where, fair) : { rows: [], skipped: false };
    let rows = first.rows;
    let skipped = first.skipped;
    const swept = from === undefined || rows.length < limit;
    // No cursor yet, time to sweep, or the backlog past the cursor ran out: the whole due range.
    if (swept) {
      const more = await this.claimWhere(this.spec.due(now), owner, now, leaseMs, limit - rows.length, where, fair !== undefined ? withClaimed(fair, rows) : undefined);
      rows = [...rows, ...more.rows];
      skipped ||= more.skipped;
    }
    const oldest = rows.reduce<Date | undefined>((m, r) => {
      const v = (r as Record<string, unknown>)[orderBy];
      return v instanceof Date && (m === undefined || v < m) ? v : m;
    }, undefined);
    // A row left behind for its lane may be older than the batch: the cursor stays where it was.
    cursor.at.claimed(cursor.scope, now, skipped ? from : rows.length === limit ? oldest : undefined, swept);
    return rows;
  }

  private async claimWhere(due: RawBuilder<unknown>, owner: string, now: Date, leaseMs: number, limit: number, where?: RawBuilder<unknown>, lanes?: LaneRoom): Promise<{ rows: Claimed<Row>[]; skipped: boolean }> {
    const { table, key, orderBy, claimedFrom, lane } = this.spec;
    if (limit <= 0) return { rows: [], skipped: false };
    const t = sql.table(table);
    const k = sql.ref(key);
    const scope = sql`(${due})${where !== undefined ? sql` and (${where})` : sql``}`;
    const fair = lanes !== undefined && lane !== undefined ? this.fairChoice(scope, lane, lanes, limit) : undefined;
    const extra = Object.entries(this.spec.onClaim?.(now) ?? {}).map(([column, value]) => sql`, ${sql.ref(column)} = ${value}`);
    const rows = await sql<Claimed<Row>>`
      with ${fair !== undefined ? sql`${fair}, ` : sql``}due as (
        select ${k}${claimedFrom !== undefined ? sql`, ${sql.ref(claimedFrom)} as claimed_from` : sql``} from ${t}
        where ${scope}${fair !== undefined ? sql` and ${k} in (select key from chosen)` : sql``}
        order by ${sql.ref(orderBy)}
        limit ${limit}
        for update skip locked
      )
      update ${t} set lease_owner = ${owner}, lease_token = gen_random_uuid()::text, lease_expires_at = ${new Date(now.getTime() + leaseMs)}, attempts = ${sql.ref(`${table}.attempts`)} + 1${sql.join(extra, sql``)}
      from due where ${sql.ref(`${table}.${key}`)} = ${sql.ref(`due.${key}`)}
      returning ${t}.*${claimedFrom !== undefined ? sql`, due.claimed_from` : sql``}${lane !== undefined ? sql`, (${lane}) as lane` : sql``}${fair !== undefined ? sql`, (select key from cand order by at, key limit 1) as first_due` : sql``}`.execute(this.db);
    // A due row was left for its lane (its lane full, or a younger row of a lane running fewer went
    // first) when the oldest candidate is not among the rows taken: the cursor must not pass it. When
    // it is, nothing older than the batch was left, whatever lanes the rows have.
    const first = rows.rows[0] as Record<string, unknown> | undefined;
    const skipped = fair !== undefined && first !== undefined && !rows.rows.some((r) => (r as Record<string, unknown>)[key] === first['first_due']);
    for (const r of rows.rows) delete (r as Record<string, unknown>)['first_due'];
    // Oldest first, as they were chosen (an UPDATE returns its rows in no set order): launched in that order.
    return { rows: rows.rows.sort((a, b) => compareBy(a, b, orderBy, key)), skipped };
  }

  /**
   * The CTEs `cand` and `chosen`: which due rows a claim of `limit` takes, fair across lanes
   * (src/outbox/lanes.ts). Each candidate's level is how many jobs its lane would run with it
   * (running now plus its rank among its lane's due rows), less one; rows of no lane are level 0.
   * A lane's rows past `perLane` are left; the rest go lowest level first, then oldest.
   */
  private fairChoice(scope: RawBuilder<unknown>, lane: RawBuilder<unknown>, lanes: LaneRoom, limit: number): RawBuilder<unknown> {
    const { key, orderBy } = this.spec;
    const busy = [...lanes.busy];
    const running = busy.length > 0 ? sql`(values ${sql.join(busy.map(([l, n]) => sql`(${l}::text, ${n}::int)`))}) as b(lane, n)` : sql`(select null::text as lane, 0 as n where false) as b`;
    const depth = sql` limit ${lanes.deep === true ? DEEP_SCAN_DEPTH : Math.max(SCAN_DEPTH, 4 * limit)}`;
    return sql`cand as (
        select key, lane, at, row_number() over (partition by lane order by at, key) as rn from (
          select ${sql.ref(key)} as key, (${lane}) as lane, ${sql.ref(orderBy)} as at from ${sql.table(this.spec.table)} where ${scope} order by ${sql.ref(orderBy)}${depth}
        ) c
      ), chosen as (
        select cand.key from cand left join ${running} on b.lane = cand.lane
        where cand.lane is null or coalesce(b.n, 0) + cand.rn <= ${Math.max(1, lanes.perLane)}
        order by case when cand.lane is null then 0 else coalesce(b.n, 0) + cand.rn - 1 end, cand.at
        limit ${limit}
      )`;
  }

  /**
   * Write an attempt's outcome and end the lease, only under `lease`: its owner and the token its
   * claim wrote (a later claim, even by the same worker, wrote another), and only while the fence in
   * force holds (src/infra/faults/fence.ts). False: the lease was lost, nothing written.
   */
  async finish(id: string, lease: Lease, update: Record<string, unknown>): Promise<boolean> {
    faultPoint('before-commit');
    if (brokenFence() !== undefined) return false;
    const sets = Object.entries({ ...update, lease_owner: null, lease_token: null, lease_expires_at: null }).map(([column, value]) => sql`${sql.ref(column)} = ${isRaw(value) ? value : sql.val(value)}`);
    const token = lease.token !== null ? sql` and lease_token = ${lease.token}` : sql``;
    const r = await sql`update ${sql.table(this.spec.table)} set ${sql.join(sets)} where ${sql.ref(this.spec.key)} = ${id} and lease_owner = ${lease.owner}${token}${this.held()}`.execute(this.db);
    return (r.numAffectedRows ?? 0n) > 0n;
  }

  /** On shutdown: hand this owner's leased rows back, due now. */
  async release(owner: string, now: Date): Promise<number> {
    const sets = Object.entries(this.spec.onRelease(now)).map(([column, value]) => sql`, ${sql.ref(column)} = ${value}`);
    const r = await sql`update ${sql.table(this.spec.table)} set lease_owner = null, lease_token = null, lease_expires_at = null${sql.join(sets, sql``)} where lease_owner = ${owner}${this.held()}`.execute(this.db);
    return Number(r.numAffectedRows ?? 0n);
  }

  /** The table's name: the queue's name in metrics and /readyz. */
  get name(): string {
    return this.spec.table;
  }

  /** Since when the oldest due row has been due (its `orderBy`), or null when none is: a plain min over the due rows, no row's content read. */
  async oldestDue(now: Date): Promise<Date | null> {
    const r = await sql<{ at: Date | string | null }>`select min(${sql.ref(this.spec.orderBy)}) as at from ${sql.table(this.spec.table)} where ${this.spec.due(now)}`.execute(this.db);
    const at = r.rows[0]?.at ?? null;
    return at === null ? null : new Date(at);
  }

  /** Delete rows created before `cutoff`. */
  async prune(cutoff: Date): Promise<number> {
    const column = this.spec.createdAt ?? 'created_at';
    const r = await sql`delete from ${sql.table(this.spec.table)} where ${sql.ref(column)} < ${cutoff}`.execute(this.db);
    return Number(r.numAffectedRows ?? 0n);
  }

  private held(): RawBuilder<unknown> {
    return this.spec.held !== undefined ? sql` and (${this.spec.held})` : sql``;
  }
}

/**
 * Where a busy queue's claims start. A claim reads its due rows oldest first through an index, and
 * each claim and finish leaves a dead version of the row behind at the old end of that index; while
 * a long transaction holds back vacuum (a forgotten session, a long report, a replica's query with
 * hot_standby_feedback) none of them can be removed, so every claim waded through all of them again
 * (`npm run bench -- --only=vacuum`). Under a backlog a full batch is claimed oldest first, so every
 * due row older than its oldest was claimed or is being claimed: the next claim starts there and
 * reads only the live end. Rows that could still hide below it (a retry or a release that set an
 * older time, a row whose insert committed late) and expired leases are found by a claim over the whole due range,
 * which runs at least every `sweepMs`, whenever a claim comes back short (the backlog ran out), and
 * when there is no cursor. Each scope (the kinds a claim asks for) has its own cursor.
 */
export class ClaimCursor {
  /** The default `sweepMs` (HERALD_CLAIM_SWEEP_MS): a row the cursor passed waits at most this long past its time. 0: no cursor. */
  static readonly SWEEP_MS = 5_000;

  private readonly cursors = new Map<string, { from: Date | undefined; sweptAt: number }>();

  constructor(private readonly sweepMs: number) {}

  /** Where a claim of `scope` at `now` may start; undefined: read the whole due range. */
  from(scope: string, now: Date): Date | undefined {
    const c = this.cursors.get(scope);
    if (this.sweepMs <= 0 || c === undefined || now.getTime() - c.sweptAt >= this.sweepMs) return undefined;
    return c.from;
  }

  /** After a claim: `oldest` is the oldest row of a full batch (undefined: the batch was short). */
  claimed(scope: string, now: Date, oldest: Date | undefined, swept: boolean): void {
    const sweptAt = swept ? now.getTime() : (this.cursors.get(scope)?.sweptAt ?? now.getTime());
    this.cursors.set(scope, { from: oldest, sweptAt });
  }
}

/** `lanes` with the rows just claimed counted as running. */
function withClaimed(lanes: LaneRoom, rows: readonly { lane?: string | null }[]): LaneRoom {
  const busy = new Map(lanes.busy);
  for (const r of rows) if (r.lane !== undefined && r.lane !== null) busy.set(r.lane, (busy.get(r.lane) ?? 0) + 1);
  return { ...lanes, busy };
}

function compareBy(a: object, b: object, orderBy: string, key: string): number {
  const x = (a as Record<string, unknown>)[orderBy];
  const y = (b as Record<string, unknown>)[orderBy];
  const byOrder = x instanceof Date && y instanceof Date ? x.getTime() - y.getTime() : 0;
  return byOrder !== 0 ? byOrder : String((a as Record<string, unknown>)[key]).localeCompare(String((b as Record<string, unknown>)[key]));
}

function isRaw(value: unknown): value is RawBuilder<unknown> {
  return typeof value === 'object' && value !== null && 'toOperationNode' in value && 'execute' in value;
}
