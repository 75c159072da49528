import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { afterFailure } from '../../outbox/failure-rule.js';
import type { Job, JobContext, JobKind, JobQueue } from '../../outbox/worker.js';
import type { Clock } from '../../platform/clock.js';
import { retryWhileUnreachable } from '../../platform/db/database.js';
import type { Transports } from '../../transports/transport.js';
import { RETENTION_MS } from '../deliveries/index.js';
import { chatSendsTable, hasUnsettledTwin, takenMessageIds } from './chat.repository.js';
import type { Database } from '../../schema.js';
import type { ChatSendRow, ChatSendUpdate } from './chat.table.js';

export const CHAT_SEND_KIND = 'chat_send';
/**
 * How long after a create that may have happened the next attempt waits before asking the
 * platform for proof: clock skew and a request the platform finished after Herald stopped waiting.
 */
const PROOF_SETTLE_MS = 11_000;


export interface ChatJob extends Job {
  readonly row: ChatSendRow;
}

/** The outbox's view of the chat_sends table. */
export function chatQueue(db: Kysely<Database>): JobQueue<ChatJob> {
  const table = chatSendsTable(db);
  return {
    claim: async (owner, now, leaseMs, _kinds, limit) => (await table.claim(owner, now, leaseMs, limit)).map((row) => ({ id: row.id, kind: CHAT_SEND_KIND, attempts: row.attempts, row })),
    release: (owner, now) => table.release(owner, now),
    prune: (now) => table.prune(new Date(now.getTime() - RETENTION_MS)),
  };
}

/**
 * Sends a chat send exactly once. Every line carries the send's id; an attempt after the first
 * (a retry, or a re-drive after the process died mid-send) first asks the platform which lines are
 * already in the channel and sends only the rest. A platform that cannot tell leaves the send
 * `unconfirmed` rather than risk a duplicate.
 */
export class ChatJobs {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly transports: Transports,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly options: { maxAttempts: number; retryBaseMs: number },
  ) {}

  kinds(): JobKind<ChatJob>[] {
    return [{ kind: CHAT_SEND_KIND, retry: { maxAttempts: this.options.maxAttempts, baseMs: this.options.retryBaseMs }, handle: (job, context) => this.attempt(job.row, context) }];
  }

  private async attempt(row: ChatSendRow, context: JobContext): Promise<void> {
    const log = this.log.child({ chat_send: row.id, transport: row.transport, attempt: row.attempts });
    let outcome: ChatSendUpdate;
    try {
      outcome = await this.deliver(row, context.signal, log);
    } catch (err) {
      const verdict = afterFailure(err, row.attempts, context.retry.maxAttempts);
      const { failure } = verdict;
      if (verdict.next === 'retry' && failure.kind === 'transient') {
        // A line that may have been created is looked for on the next attempt: not before a create
        // still under way at the platform has surely landed, so "absent" is a verdict.
        const retryAt = context.retryAt(failure.retryAfterMs);
        const settled = this.clock.now().getTime() + PROOF_SETTLE_MS;
        const next = failure.mayHaveCreated === true && retryAt.getTime() < settled ? new Date(settled) : retryAt;
        outcome = { status: 'pending', next_attempt_at: next, reason: failure.detail };
        log.info({ detail: failure.detail }, 'chat send will be retried');
      } else {
        outcome = { status: 'failed', reason: verdict.next === 'failed' && !verdict.exhausted ? failure.detail : `attempts exhausted (${failure.detail})` };
      }
    }
    const leaseEnds = (row.lease_expires_at?.getTime() ?? 0) - this.clock.now().getTime();
    const recorded = await retryWhileUnreachable(() => chatSendsTable(this.db).finish(row.id, context.owner, outcome), leaseEnds);
    if (!recorded) log.warn('lease lost before the chat send was recorded; the new holder re-drives it');
    else if (outcome.status !== 'pending') log.info({ state: outcome.status, reason: outcome.reason ?? undefined }, 'chat send finished');
  }

  private async deliver(row: ChatSendRow, signal: AbortSignal, log: Logger): Promise<ChatSendUpdate> {
    const chat = this.transports.get(row.transport)?.chat;
    if (chat === undefined) return { status: 'failed', reason: `transport ${row.transport} is not configured for chat` };
    let already = new Map<number, string>();
    if (row.attempts > 1) {
      // An earlier attempt may have got some lines out: the platform's proof says which.
      const proof = {
        text: row.text,
        sender: row.sender,
        since: row.created_at,
        taken: (ids: readonly string[]) => takenMessageIds(this.db, row, ids),
        twins: () => hasUnsettledTwin(this.db, row),
      };
      const seen = await chat.sentParts(row.channel, row.id, signal, proof);
      if (seen === undefined) {
        log.warn('an earlier attempt may have sent this and the platform cannot tell; not sending again');
        return { status: 'unconfirmed', reason: 'an earlier attempt may have sent it, and the platform cannot tell whether it did' };
      }
      already = seen;
      if (seen.size > 0) log.info({ parts_found: seen.size }, 'lines of an earlier attempt found in the channel; sending only the rest');
    }
    // Parts the proof did not find are sent fresh: nothing relies on a nonce window here.
    const sent = await chat.send(row.channel, row.text, row.sender, row.id, already, signal);
    if (!sent.confirmed) {
      return { status: 'unconfirmed', message_ids: JSON.stringify(sent.messageIds), reason: 'the platform gives no proof of delivery (the IRC server lacks labeled-response or echo-message)' };
    }
    return { status: 'delivered', message_ids: JSON.stringify(sent.messageIds), reason: null };
  }
}
