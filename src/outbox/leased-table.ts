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
   * table) and count the attempt. `where` narrows which rows (e.g. the kinds a worker runs).
   */
  async claim(owner: string, now: Date, leaseMs: number, limit: number, where?: RawBuilder<unknown>): Promise<(Row & { claimed_from?: string })[]> {
    const { table, key, orderBy, claimedFrom } = this.spec;
    const t = sql.table(table);
    const k = sql.ref(key);
    const extra = Object.entries(this.spec.onClaim?.(now) ?? {}).map(([column, value]) => sql`, ${sql.ref(column)} = ${value}`);
    const rows = await sql<Row & { claimed_from?: string }>`
      with due as (
        select ${k}${claimedFrom !== undefined ? sql`, ${sql.ref(claimedFrom)} as claimed_from` : sql``} from ${t}
        where (${this.spec.due(now)})${where !== undefined ? sql` and (${where})` : sql``}
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

function isRaw(value: unknown): value is RawBuilder<unknown> {
  return typeof value === 'object' && value !== null && 'toOperationNode' in value && 'execute' in value;
}
