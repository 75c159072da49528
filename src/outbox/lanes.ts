/**
 * Fair slots across lanes. A lane is what paces a job's sends together, so that jobs of one lane
 * wait for each other whatever the pool's size: a chat send on IRC waits its turn on its sender's
 * connection (src/transports/irc/irc-connection.ts, `pace()`). Claimed oldest first alone, one lane's
 * backlog took every slot of the pool while the other lanes' connections idled (one flooding
 * sender, then the next: `npm run bench -- --only=irc`, the blocks round). A job of no lane (a
 * Discord delivery, whose limits Discord's client keeps) is claimed as before.
 *
 * The worker knows how many jobs of each lane it runs; a claim (`pickFair`) fills the room level by
 * level, the lanes running fewest first: at level k a lane running k jobs or fewer takes its oldest
 * due row, and a lane never runs more than `perLane` (the worker's default: half the pool, so with
 * 8 slots 4 busy senders run 2 each, and a lone sender 4, enough to keep its connection's pace).
 * Each level reads due rows oldest first, without locking, leaving out the lanes already past the
 * level (in SQL, so one lane's backlog cannot hide the others' rows behind it) and the rows already
 * picked; a level no lane could enter is not read. The queue then claims exactly the picked rows
 * with its ordinary claim, under its due condition and `FOR UPDATE SKIP LOCKED`, so a row taken
 * meanwhile by another worker, or no longer due, is just not claimed. A claim that left a due row
 * behind for its lane does not move the claim cursor past it (src/outbox/leased-table.ts).
 *
 * What a lane takes is always its oldest due rows, in order, and the worker launches them in that
 * order: the order of one sender's lines is kept as before.
 *
 * Leaving busy lanes out costs a read through their backlog: when every lane with due rows is
 * busy, through all of it, and under a flood that was every claim (a read of thousands of rows per
 * claim, a third of the irc bench's allowance round). So a read that leaves lanes out looks at
 * most SCAN_DEPTH due rows deep, except in a `deep` claim (the worker's, LANE_DEEP_SCAN_MS apart):
 * a lane whose first row lies deeper behind busy lanes' backlogs waits at most that long to be found.
 */

/** The worker's lanes for a claim: how many jobs each runs now, and how many a lane may run. */
export interface LaneRoom {
  readonly busy: ReadonlyMap<string, number>;
  readonly perLane: number;
  /** Read past busy lanes' backlogs as deep as they go (otherwise at most SCAN_DEPTH rows). */
  readonly deep?: boolean;
}

/** How often a worker's claim reads as deep as the due rows go, looking for lanes behind backlogs. */
export const LANE_DEEP_SCAN_MS = 200;

/** How many due rows deep a read that leaves busy lanes out looks, unless deep. */
export const SCAN_DEPTH = 256;

/** A due row as a claim first reads it: its key and its lane (null: none). */
export interface LaneCandidate {
  key: string;
  lane: string | null;
}

/**
 * Reads due rows oldest first, without locking: not of `fullLanes`, not keyed in `picked`, at most
 * `limit`; with `depth`, only among the oldest `depth` due rows.
 */
export type PeekDue = (fullLanes: readonly string[], picked: readonly string[], limit: number, depth: number | undefined) => Promise<LaneCandidate[]>;

/** At most this many reads of due rows for one claim. */
const MAX_PEEKS = 12;

/**
 * Which due rows a claim of `limit` should take: their keys (with their lanes), and `skipped`:
 * whether a due row may have been left behind for its lane (then a claim cursor must not move past it).
 */
export async function pickFair(peek: PeekDue, limit: number, room: LaneRoom): Promise<{ picked: Map<string, string | null>; skipped: boolean }> {
  const held = new Map(room.busy);
  const picked = new Map<string, string | null>();
  const window = Math.max(32, 4 * limit);
  const perLane = Math.max(1, room.perLane);
  let skipped = false;
  let peeks = 0;
  let level = 0;
  while (level < perLane && picked.size < limit && peeks < MAX_PEEKS) {
    const full = [...held].filter(([, n]) => n > level).map(([lane]) => lane);
    if (full.length > 0) skipped = true;
    const rows = await peek(full, [...picked.keys()], window, full.length > 0 && room.deep !== true ? Math.max(SCAN_DEPTH, 2 * window) : undefined);
    peeks += 1;
    for (const { key, lane } of rows) {
      if (picked.size >= limit) break;
      if (lane === null) {
        picked.set(key, null);
        continue;
      }
      const n = held.get(lane) ?? 0;
      if (n > level) {
        skipped = true;
        continue;
      }
      held.set(lane, n + 1);
      picked.set(key, lane);
    }
    // A full read may have more behind it: read again, leaving out the lanes that just filled up.
    if (rows.length >= window) continue;
    // Every due row of the lanes not left out was seen (down to the depth read): the next level
    // worth reading lets in the least busy of those left out (none: nothing more to take).
    level = Math.min(...[...held.values()].filter((n) => n > level));
  }
  if (picked.size < limit && peeks >= MAX_PEEKS) skipped = true;
  return { picked, skipped };
}
