import { sql, type Kysely, type RawBuilder } from 'kysely';

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
}

/** The leased-table queue over one table: claim, finish under the lease, release, prune. */
export class LeasedTable<Row> {
  constructor(
    private readonly db: Kysely<unknown>,
    private readonly spec: LeasedTableSpec,
  ) {}

  /**
   * Lease up to `limit` due rows (`FOR UPDATE SKIP LOCKED`: any number of workers share the
   * table) and count the attempt. `where` narrows which rows (e.g. the kinds a worker runs);
   * `cursor`, under a backlog, starts the claim past the rows its scope already claimed.
   */
  async claim(owner: string, now: Date, leaseMs: number, limit: number, where?: RawBuilder<unknown>, cursor?: { at: ClaimCursor; scope: string }): Promise<(Row & { claimed_from?: string })[]> {
    const { dueFrom, orderBy } = this.spec;
    const from = dueFrom !== undefined ? cursor?.at.from(cursor.scope, now) : undefined;
    if (cursor === undefined || dueFrom === undefined) return this.claimWhere(this.spec.due(now), owner, now, leaseMs, limit, where);
    let rows = from !== undefined ? await this.claimWhere(dueFrom(now, from), owner, now, leaseMs, limit, where) : [];
    const swept = from === undefined || rows.length < limit;
    // No cursor yet, time to sweep, or the backlog past the cursor ran out: the whole due range.
    if (swept) rows = [...rows, ...(await this.claimWhere(this.spec.due(now), owner, now, leaseMs, limit - rows.length, where))];
    const oldest = rows.reduce<Date | undefined>((m, r) => {
      const v = (r as Record<string, unknown>)[orderBy];
      return v instanceof Date && (m === undefined || v < m) ? v : m;
    }, undefined);
    cursor.at.claimed(cursor.scope, now, rows.length === limit ? oldest : undefined, swept);
    return rows;
  }

  private async claimWhere(due: RawBuilder<unknown>, owner: string, now: Date, leaseMs: number, limit: number, where?: RawBuilder<unknown>): Promise<(Row & { claimed_from?: string })[]> {
    const { table, key, orderBy, claimedFrom } = this.spec;
    const t = sql.table(table);
    const k = sql.ref(key);
    const extra = Object.entries(this.spec.onClaim?.(now) ?? {}).map(([column, value]) => sql`, ${sql.ref(column)} = ${value}`);
    const rows = await sql<Row & { claimed_from?: string }>`
      with due as (
        select ${k}${claimedFrom !== undefined ? sql`, ${sql.ref(claimedFrom)} as claimed_from` : sql``} from ${t}
        where (${due})${where !== undefined ? sql` and (${where})` : sql``}
        order by ${sql.ref(orderBy)}
        limit ${limit}
        for update skip locked
      )
      update ${t} set lease_owner = ${owner}, lease_expires_at = ${new Date(now.getTime() + leaseMs)}, attempts = ${sql.ref(`${table}.attempts`)} + 1${sql.join(extra, sql``)}
      from due where ${sql.ref(`${table}.${key}`)} = ${sql.ref(`due.${key}`)}
      returning ${t}.*${claimedFrom !== undefined ? sql`, due.claimed_from` : sql``}`.execute(this.db);
    return rows.rows;
  }

  /** Write an attempt's outcome and end the lease, only while `owner` holds it. False: the lease was lost. */
  async finish(id: string, owner: string, update: Record<string, unknown>): Promise<boolean> {
    const sets = Object.entries({ ...update, lease_owner: null, lease_expires_at: null }).map(([column, value]) => sql`${sql.ref(column)} = ${isRaw(value) ? value : sql.val(value)}`);
    const r = await sql`update ${sql.table(this.spec.table)} set ${sql.join(sets)} where ${sql.ref(this.spec.key)} = ${id} and lease_owner = ${owner}${this.held()}`.execute(this.db);
    return (r.numAffectedRows ?? 0n) > 0n;
  }

  /** On shutdown: hand this owner's leased rows back, due now. */
  async release(owner: string, now: Date): Promise<number> {
    const sets = Object.entries(this.spec.onRelease(now)).map(([column, value]) => sql`, ${sql.ref(column)} = ${value}`);
    const r = await sql`update ${sql.table(this.spec.table)} set lease_owner = null, lease_expires_at = null${sql.join(sets, sql``)} where lease_owner = ${owner}${this.held()}`.execute(this.db);
    return Number(r.numAffectedRows ?? 0n);
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

function isRaw(value: unknown): value is RawBuilder<unknown> {
  return typeof value === 'object' && value !== null && 'toOperationNode' in value && 'execute' in value;
}
