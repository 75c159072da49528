import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { DeliveriesDb } from './delivery.table.js';
import { RECONCILE_SKEW_MS } from './delivery.doubt.js';

/**
 * Twins take turns. Twins are deliveries with the same target and the same body (`target::text`,
 * `body::text`: the same content to the same target, so the same channel), of any kind, sent as the
 * same identity (another bot's message has another author, which the proof tells apart: one bot's
 * twin never holds back another's). Two twins in
 * doubt together cannot be told apart by the channel's history (same author, same content, windows
 * that overlap): reconciliation had to answer `unknown` for them (delivery.reconcile.ts). So a twin
 * is never attempted while another could still be confused with it, and every proof stays decidable.
 *
 * How long a twin's doubt holds the others back. A twin T in doubt over [from, until] (Herald's clock)
 * may have a message Discord dates up to `until + RECONCILE_SKEW_MS` (skew, and a request Discord
 * finished after Herald stopped waiting). An attempt of R claimed at `now` creates nothing Discord
 * dates before `now − RECONCILE_SKEW_MS`, and R's proof reads history from its doubt's start (≥ now)
 * less the skew, and counts T as a twin while T's `until` reaches that start less the skew. Both
 * widened, the windows are apart once `now > until + 2 × RECONCILE_SKEW_MS`; a second more for
 * the timestamps' rounding.
 */
export const TWIN_DOUBT_CLEAR_MS = 2 * RECONCILE_SKEW_MS + 1_000;

/**
 * `t` is a twin of `d`: the same content to the same target, compared through the expression of the
 * `deliveries_twins_*` indexes (the texts too: a hash is only where to look).
 */
function twinOf(t: string, d: string): RawBuilder<boolean> {
  const [tt, dd] = [sql.table(t), sql.table(d)];
  return sql<boolean>`md5(${tt}.target::text || ${tt}.body::text) = md5(${dd}.target::text || ${dd}.body::text)
    and ${tt}.request_id <> ${dd}.request_id and ${tt}.target::text = ${dd}.target::text and ${tt}.body::text = ${dd}.body::text
    and ${tt}.identity is not distinct from ${dd}.identity`;
}

/**
 * The claim's condition on a due row of `deliveries`: no twin T holds it back. T holds it back while T
 * is
 * - in flight, whatever its lease (an expired one is being re-driven, or about to be), unless both
 *   are in flight and this row is the older one (first come, first re-driven: two twins left in
 *   flight together by an older Herald must not wait on each other for good);
 * - pending and older (created_at, then request_id) than this pending row: twins go first come,
 *   first served, so two pending twins never both pass (each would have to be older than the other);
 * - not delivered, with a doubt that ended less than TWIN_DOUBT_CLEAR_MS before `now`: a message T
 *   may have created could not be told apart from one this attempt creates. A twin ending `unknown`
 *   holds the others back that long and no longer.
 *
 * Three probes, each through its own partial index (migrations/2026-12-06T14-10-00_twin-lane.ts):
 * proving that none holds a row back reads no twin that cannot (a hundred pending twins of the row
 * claimed next are younger than it, and never read). `offset 0` keeps each a subplan run on the due
 * rows the claim reads: flattened into anti-joins, they read every due row and every twin in each claim.
 *
 * One claim statement reads one snapshot, so it never takes two twins: in it, at most the oldest due
 * twin passes. Two claims at once (two workers, two replicas, READ COMMITTED), each on its own
 * snapshot, with both twins visible to both: each twin passes only if the other is not in flight and
 * not older and pending in that claim's snapshot — a twin the other claim has just taken is, for this
 * one, still what it was before (pending, or in flight with an expired lease), so the first-come
 * order still lets only one pass; the one taken by the other claim is then locked, and `SKIP LOCKED`
 * (or, once that claim committed, the recheck of the due condition on its new version) leaves it.
 * What the condition cannot see is a twin that becomes due by a commit during a claim: an insert
 * (its created_at is set before it commits, so it may be older than a twin another claim just took
 * while it was invisible) or a reset to pending. Two claims could then take twins at once; `yieldTwins`
 * closes that gap after the claim has committed.
 */
export function twinLane(now: Date): RawBuilder<unknown> {
  const cleared = new Date(now.getTime() - TWIN_DOUBT_CLEAR_MS);
  const older = sql`(t.created_at, t.request_id) < (deliveries.created_at, deliveries.request_id)`;
  return sql`not exists (
    select 1 from deliveries t where t.status = 'in_flight' and ${twinOf('t', 'deliveries')} and (deliveries.status = 'pending' or ${older}) offset 0
  ) and (deliveries.status <> 'pending' or not exists (
    select 1 from deliveries t where t.status = 'pending' and ${twinOf('t', 'deliveries')} and ${older} offset 0
  )) and not exists (
    select 1 from deliveries t where t.doubt_until is not null and ${twinOf('t', 'deliveries')} and t.doubt_until > ${cleared} and t.status <> 'delivered' offset 0
  )`;
}

/**
 * After a claim has committed: hand back, untouched, each row just claimed whose twin another claim
 * holds now (in flight under a live lease). Returns the request_ids handed back.
 *
 * Why two claims cannot both keep twins: each commits its claim, then runs this on a newer snapshot.
 * Of two claims, the one that committed second runs this after both commits, so it sees the other's
 * twin in flight and yields (both may yield; then both twins are pending again, and the next claim takes
 * the older one). A yielded row is back as it was before the claim, with the attempt not counted:
 * pending, due as before; a re-driven row (its lease had expired) stays pending with the doubt the
 * claim widened over its abandoned attempt, due now, as a release leaves it.
 */
export async function yieldTwins(db: Kysely<DeliveriesDb>, owner: string, now: Date, claimed: readonly { request_id: string; claimed_from: string; lease_token: string | null }[]): Promise<Set<string>> {
  if (claimed.length === 0) return new Set();
  const redriven = claimed.filter((r) => r.claimed_from === 'in_flight').map((r) => r.request_id);
  // Only under this claim's own token: a row another claim has taken since is not this one's to hand back.
  const mine = sql.join(claimed.map((c) => sql`(${c.request_id}, ${c.lease_token})`));
  const r = await sql<{ request_id: string }>`
    update deliveries set status = 'pending', lease_owner = null, lease_token = null, lease_expires_at = null, attempts = deliveries.attempts - 1,
      next_attempt_at = ${redriven.length > 0 ? sql`case when deliveries.request_id in (${sql.join(redriven)}) then ${now} else deliveries.next_attempt_at end` : sql`deliveries.next_attempt_at`}
    where (deliveries.request_id, deliveries.lease_token) in (${mine}) and deliveries.lease_owner = ${owner} and deliveries.status = 'in_flight'
      and exists (select 1 from deliveries t where ${twinOf('t', 'deliveries')} and t.status = 'in_flight' and t.lease_expires_at > ${now})
    returning deliveries.request_id`.execute(db);
  return new Set(r.rows.map((x) => x.request_id));
}
