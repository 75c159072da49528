/**
 * Fair slots across lanes. A lane is what paces a job's sends together, so that jobs of one lane
 * wait for each other whatever the pool's size: a chat send on IRC waits its turn on its sender's
 * connection (src/platforms/irc/irc-connection.ts, `pace()`). Claimed oldest first alone, one lane's
 * backlog took every slot of the pool while the other lanes' connections idled (one flooding
 * sender, then the next: `npm run bench -- --only=irc`, the blocks round). A job of no lane (a
 * Discord delivery, whose limits Discord's client keeps) has none of this.
 *
 * The worker knows how many jobs of each lane it runs (`LaneRoom`), and a queue whose rows have a
 * lane (LeasedTableSpec.lane, src/outbox/leased-table.ts) fills the room in its one claim
 * statement level by level, the lanes running fewest first: a due row's level is how many jobs its
 * lane would run with it, less one (rows of no lane: 0); rows go lowest level first, then oldest,
 * and a lane never runs more than `perLane` (the worker's default: half the pool, so with 8 slots
 * 4 busy senders run 2 each and a lone sender 4, enough to keep its connection's pace). The choice
 * is made among the due rows read oldest first without locking; the rows chosen are then claimed
 * under the claim's own due condition and `FOR UPDATE SKIP LOCKED`, as every claim, so a row taken
 * meanwhile by another worker, or no longer due, is just not claimed.
 *
 * What a lane takes is always its oldest due rows, and the worker launches them oldest first: the
 * order of one sender's lines is kept as before. A claim that may have left a due row behind for
 * its lane does not move the claim cursor past it.
 *
 * The choice reads at most SCAN_DEPTH due rows (or 4 × the claim's limit), except in a `deep` claim
 * (the worker's, LANE_DEEP_SCAN_MS apart), which reads up to DEEP_SCAN_DEPTH: a lane whose first row
 * lies deeper behind other lanes' backlogs waits at most that long to be found (behind more than
 * DEEP_SCAN_DEPTH due rows, until the backlog ahead of it shrinks: a deep read of a backlog of a
 * million rows five times a second would cost more than the fairness is worth). Reading the whole
 * backlog in every claim, or a statement per level, cost most of Herald's ceiling under a flood (the
 * irc bench's allowance round).
 *
 * While deep claims pay (one took rows of a lane that was not full when shallow ones found nothing:
 * its work lies behind a full lane's backlog), they come LANE_DEEP_SCAN_PAYING_MS apart instead, and a shallow
 * claim that finds nothing is followed at once by a deep one, for LANE_DEEP_PAYING_HOLD_MS after the
 * last that paid. Found only every LANE_DEEP_SCAN_MS, such a lane ran at a fraction of its pace: a
 * Slack workspace's 200 posts over 20 channels took 2.74× as long beside another workspace's
 * backlog of 400 posts to one channel (`npm run bench -- --only=slack-identities`). A lone lane's
 * flood never pays (its deep claims find nothing its shallow ones did not), so it costs no more.
 */

/**
 * A worker's deep claims of one queue: when the last was, whether a shallow one found nothing since
 * (and which lanes were full then), and until when they pay.
 */
export class DeepScans {
  private deepAt = -Infinity;
  private missed = false;
  private fullAtMiss: ReadonlySet<string> = new Set();
  /** Until when (performance.now()) deep claims count as paying. */
  payingUntil = -Infinity;

  /** Whether the next claim reads deep: LANE_DEEP_SCAN_MS apart, or LANE_DEEP_SCAN_PAYING_MS while deep claims pay. */
  private due(now = performance.now()): boolean {
    return now - this.deepAt >= this.every(now);
  }

  private every(now: number): number {
    return now < this.payingUntil ? LANE_DEEP_SCAN_PAYING_MS : LANE_DEEP_SCAN_MS;
  }

  /** For the next claim: whether it reads deep (then counted as made now). */
  take(): boolean {
    const now = performance.now();
    if (!this.due(now)) return false;
    this.deepAt = now;
    return true;
  }

  /**
   * What a claim found. A deep claim that took a row of a lane that was not full when shallow ones
   * found nothing (or of no lane) has found work behind other lanes' backlogs: for
   * LANE_DEEP_PAYING_HOLD_MS, deep claims come LANE_DEEP_SCAN_PAYING_MS apart. (A row of a lane
   * that was full then is its own backlog moving on: a lone lane's flood never pays.) A shallow
   * claim that found nothing while a lane is full (its backlog may hide others' rows) is followed
   * by a deep one as soon as one is due. Answers `again` (claim deep now), or `wakeInMs` (when the
   * next deep claim is due: nothing may wake the worker before then), or neither.
   */
  claimed(room: LaneRoom, lanes: readonly (string | undefined)[]): { again?: true; wakeInMs?: number } {
    const now = performance.now();
    if (room.deep === true) {
      if (this.missed && lanes.some((lane) => lane === undefined || !this.fullAtMiss.has(lane))) this.payingUntil = now + LANE_DEEP_PAYING_HOLD_MS;
      this.missed = false;
      return {};
    }
    if (lanes.length > 0) {
      this.missed = false;
      return {};
    }
    // Nothing found and no lane full: nothing is hidden behind a backlog (an idle queue costs one claim a poll).
    const full = [...room.busy].filter(([, n]) => n >= room.perLane).map(([lane]) => lane);
    if (full.length === 0) return {};
    this.missed = true;
    this.fullAtMiss = new Set(full);
    return this.due(now) ? { again: true } : { wakeInMs: this.deepAt + this.every(now) - now };
  }
}

/** The worker's lanes for a claim: how many jobs each runs now, and how many a lane may run. */
export interface LaneRoom {
  readonly busy: ReadonlyMap<string, number>;
  readonly perLane: number;
  /** Choose among the oldest DEEP_SCAN_DEPTH due rows, not only the oldest SCAN_DEPTH. */
  readonly deep?: boolean;
}

/** How often a worker's claim chooses among every due row, looking for lanes behind backlogs. */
export const LANE_DEEP_SCAN_MS = 200;

/** How often, at most, while deep claims pay. */
export const LANE_DEEP_SCAN_PAYING_MS = 20;

/** How long deep claims count as paying after the last that did. */
export const LANE_DEEP_PAYING_HOLD_MS = 1_000;

/** How many of the oldest due rows a claim that is not deep chooses among (at least). */
export const SCAN_DEPTH = 256;

/** How many of the oldest due rows a deep claim chooses among. */
export const DEEP_SCAN_DEPTH = 8_192;
