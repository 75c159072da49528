import { createHmac } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Job, JobKind, JobQueue } from '../../outbox/worker.js';
import type { Clock } from '../../infra/clock.js';
import { errorSummary } from '../../infra/errors.js';
import type { InboxMetrics } from './inbox.metrics.js';
import { findEvent, PUSH_KIND, pushesTable } from './inbox.repository.js';
import { toWire } from './inbox.wire.js';
import type { InboxDb, InboxPushRow } from './inbox.table.js';

/** One push of one event. */
export interface PushJob extends Job {
  readonly row: InboxPushRow;
}

/** How long one POST may take before it counts as a timeout (retried). */
const POST_TIMEOUT_MS = 10_000;

/**
 * The signature a receiver checks: HMAC-SHA256 with the operator's key over `timestamp + "." +
 * body`, hex, as `Herald-Signature: sha256=<hex>` beside `Herald-Timestamp: <unix seconds>`. The
 * body holds the event's `event_id`, so it is signed: a receiver dedups on that, and may check that
 * `Idempotency-Key` is `idempotencyKey(event_id)` (it is derived, never chosen apart from the body).
 */
export function signature(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/**
 * The `Idempotency-Key` of an event: its `event_id`, with every character outside printable ASCII
 * (and `%` itself) percent-encoded as UTF-8, so the header is ASCII by construction. A reaction's
 * event_id holds its emoji, which Node refuses in a header (`Cannot convert argument to a
 * ByteString`); a lone surrogate (never valid UTF-8) is encoded as U+FFFD. Any other event_id is
 * already ASCII and unchanged.
 */
export function idempotencyKey(eventId: string): string {
  return eventId.replace(/[^\x21-\x24\x26-\x7e]+/gu, (run) => encodeURIComponent(run.replace(/\p{Surrogate}/gu, '\ufffd')).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`));
}

export function pushQueue(db: Kysely<InboxDb>): JobQueue<PushJob> {
  const table = pushesTable(db);
  return {
    name: table.name,
    oldestDue: (now) => table.oldestDue(now),
    claim: async (owner, now, leaseMs, _kinds, limit) => (await table.claim(owner, now, leaseMs, limit)).map((row) => ({ id: row.id, kind: PUSH_KIND, attempts: row.attempts, leaseToken: row.lease_token, row })),
    release: (owner, now) => table.release(owner, now),
    quarantine: (job, lease, reason) => table.finish(job.id, lease, { status: 'failed', last_error: reason }),
  };
}

type Outcome = { ok: true } | { ok: false; retry: boolean; why: string };

/** One POST of one event's body. */
async function post(o: PushOptions, clock: Clock, body: string, eventId: string, signal: AbortSignal): Promise<Outcome> {
  const timestamp = String(Math.floor(clock.now().getTime() / 1000));
  let headers: Headers;
  try {
    headers = new Headers({ 'Content-Type': 'application/json', 'Herald-Timestamp': timestamp, 'Herald-Signature': signature(o.secret, timestamp, body), 'Idempotency-Key': idempotencyKey(eventId) });
  } catch (err) {
    // A request that cannot be built never will be: failed at once with why, not retried for a day.
    return { ok: false, retry: false, why: `the push cannot be built: ${errorSummary(err).slice(0, 200)}` };
  }
  try {
    const res = await fetch(o.url, { method: 'POST', headers, body, signal: AbortSignal.any([signal, AbortSignal.timeout(POST_TIMEOUT_MS)]), redirect: 'manual' });
    await res.body?.cancel().catch(() => undefined);
    return res.ok ? { ok: true } : { ok: false, retry: res.status >= 500 || res.status === 408 || res.status === 429, why: `HTTP ${res.status}` };
  } catch (err) {
    return { ok: false, retry: true, why: errorSummary(err).slice(0, 200) };
  }
}

export interface PushOptions {
  url: string;
  secret: string;
  /** A push still failing this long after the event was stored is given up. */
  giveUpMs: number;
  retryBaseMs: number;
}

/**
 * The webhook push, a job of the outbox: POST the event (the contract's InboxEvent), signed, with
 * `Idempotency-Key` derived from its event_id (`idempotencyKey`), so the receiver keeps each once however often it is sent (a
 * retry after a lost answer). 2xx: done. 5xx, 408, 429, a timeout or no answer: again with backoff,
 * until `giveUpMs` after the event was stored. Another 4xx: the receiver refused it, given up. Given
 * up or not, the event stays in the inbox.
 */
export function pushKind(db: Kysely<InboxDb>, clock: Clock, log: Logger, metrics: InboxMetrics, o: PushOptions): JobKind<PushJob> {
  const table = pushesTable(db);
  return {
    kind: PUSH_KIND,
    concurrency: 4,
    retry: { maxAttempts: 1_000_000, baseMs: o.retryBaseMs, capMs: 5 * 60_000 },
    async handle(job, context) {
      const event = await findEvent(db, job.id);
      if (event === undefined) {
        // Dropped by retention before it could be pushed.
        await table.finish(job.id, context.lease, { status: 'failed', last_error: 'event no longer in the inbox' });
        return;
      }
      const body = JSON.stringify(toWire(event));
      const outcome = await post(o, clock, body, event.event_id, context.signal);
      const about = { inbox_id: job.id, event_id: event.event_id, attempt: job.attempts };
      if (outcome.ok) {
        metrics.pushed('delivered');
        log.info(about, 'inbox event pushed to the webhook');
        await table.finish(job.id, context.lease, { status: 'done', last_error: null });
        return;
      }
      const next = context.retryAt();
      if (outcome.retry && next.getTime() < job.row.created_at.getTime() + o.giveUpMs) {
        metrics.pushed('retried');
        log.warn({ ...about, why: outcome.why, retry_at: next.toISOString() }, 'inbox webhook push failed; retrying');
        await table.finish(job.id, context.lease, { status: 'pending', next_attempt_at: next, last_error: outcome.why });
        return;
      }
      metrics.pushed('given_up');
      log.error({ ...about, why: outcome.why }, 'inbox webhook push given up; the event stays in the inbox');
      await table.finish(job.id, context.lease, { status: 'failed', last_error: outcome.why });
    },
  };
}
