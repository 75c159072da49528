import { sql, type Kysely } from 'kysely';
import { RETENTION_MS } from './delivery.js';
import type { Clock } from '../../infra/clock.js';
import type { DeliveriesDb } from './delivery.table.js';

type Db = Kysely<DeliveriesDb>;

/** How often a process drops every principal's records older than RETENTION_MS (besides a caller's own, as it writes). */
const SWEEP_EVERY_MS = 10 * 60_000;

export interface AgentMessage {
  request_id: string;
  kind: 'post' | 'dm';
  seq: number;
  sent_at: string;
}

/** A file an older `herald mcp` kept (HERALD_MCP_STATE): one principal's part of it. */
export interface ImportedRecords {
  messages: Record<string, { kind: 'post' | 'dm'; seq: number; sent_at: string; edits?: Record<string, number> }>;
  sent?: Record<string, string>;
}

const asMessage = (row: { request_id: string; kind: 'post' | 'dm'; seq: number; sent_at: Date | string }): AgentMessage => ({
  request_id: row.request_id,
  kind: row.kind,
  seq: Number(row.seq),
  sent_at: new Date(row.sent_at).toISOString(),
});

/**
 * What `herald mcp` remembers of each caller's sends, in the store (issue 39: its replicas on
 * different hosts share it): per principal, its posts and DMs with their last edit seq, the seq each
 * edit id took, the request_ids it claimed. Every change is one statement or one transaction holding
 * the message's row: two replicas at once never take the same seq, and exactly one of two claims is
 * the first. Records older than RETENTION_MS (8 days) are not answered and are dropped.
 */
export class AgentRecordsStore {
  /** When this process last swept every principal's old records (NaN: not yet). */
  private sweptAt = Number.NaN;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  private cutoff(): Date {
    return new Date(this.clock.now().getTime() - RETENTION_MS);
  }

  async message(principal: string, requestId: string): Promise<AgentMessage | undefined> {
    const row = await this.db
      .selectFrom('agent_messages')
      .select(['request_id', 'kind', 'seq', 'sent_at'])
      .where('principal', '=', principal)
      .where('request_id', '=', requestId)
      .where('sent_at', '>', this.cutoff())
      .executeTakeFirst();
    return row === undefined ? undefined : asMessage(row);
  }

  /** Notes a message once; an expired one is noted afresh (seq 0), as the file of old did. */
  async remember(principal: string, requestId: string, kind: 'post' | 'dm'): Promise<AgentMessage> {
    await this.sweep();
    const now = this.clock.now();
    const cutoff = this.cutoff();
    await this.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('agent_messages').where('principal', '=', principal).where('request_id', '=', requestId).where('sent_at', '<=', cutoff).execute();
      const fresh = await trx
        .insertInto('agent_messages')
        .values({ principal, request_id: requestId, kind, seq: 0, sent_at: now })
        .onConflict((oc) => oc.columns(['principal', 'request_id']).doNothing())
        .returning('request_id')
        .executeTakeFirst();
      // A message noted afresh has taken no edit yet (an expired one's edits are not its).
      if (fresh !== undefined) await trx.deleteFrom('agent_message_edits').where('principal', '=', principal).where('request_id', '=', requestId).execute();
    });
    const row = await this.message(principal, requestId);
    if (row === undefined) throw new Error('a message just noted is not there');
    return row;
  }

  /**
   * The message's next edit seq, taken under its row's lock: no two calls get the same one. With
   * an edit id: the seq it took before, if it took one. undefined: no such message (or expired).
   */
  async nextSeq(principal: string, requestId: string, editId: string | undefined): Promise<number | undefined> {
    const cutoff = this.cutoff();
    return this.db.transaction().execute(async (trx) => {
      const held = await trx
        .selectFrom('agent_messages')
        .select('seq')
        .where('principal', '=', principal)
        .where('request_id', '=', requestId)
        .where('sent_at', '>', cutoff)
        .forUpdate()
        .executeTakeFirst();
      if (held === undefined) return undefined;
      if (editId !== undefined) {
        const earlier = await trx.selectFrom('agent_message_edits').select('seq').where('principal', '=', principal).where('request_id', '=', requestId).where('edit_id', '=', editId).executeTakeFirst();
        if (earlier !== undefined) return Number(earlier.seq);
      }
      const next = await trx
        .updateTable('agent_messages')
        .set({ seq: sql<number>`seq + 1` })
        .where('principal', '=', principal)
        .where('request_id', '=', requestId)
        .returning('seq')
        .executeTakeFirstOrThrow();
      const seq = Number(next.seq);
      if (editId !== undefined) await trx.insertInto('agent_message_edits').values({ principal, request_id: requestId, edit_id: editId, seq, at: this.clock.now() }).execute();
      return seq;
    });
  }

  /** Whether the principal sent or claimed `requestId` within the retention. */
  async owns(principal: string, requestId: string): Promise<boolean> {
    const cutoff = this.cutoff();
    const claimed = await this.db.selectFrom('agent_claims').select('request_id').where('principal', '=', principal).where('request_id', '=', requestId).where('claimed_at', '>', cutoff).executeTakeFirst();
    return claimed !== undefined || (await this.message(principal, requestId)) !== undefined;
  }

  /** Claims `requestId`; answers whether it was claimed before (the unique key decides between two at once). */
  async claim(principal: string, requestId: string): Promise<boolean> {
    await this.sweep();
    const now = this.clock.now();
    // An expired claim is no claim: taken afresh, as if never made.
    await this.db.deleteFrom('agent_claims').where('principal', '=', principal).where('request_id', '=', requestId).where('claimed_at', '<=', this.cutoff()).execute();
    const inserted = await this.db
      .insertInto('agent_claims')
      .values({ principal, request_id: requestId, claimed_at: now })
      .onConflict((oc) => oc.columns(['principal', 'request_id']).doNothing())
      .returning('request_id')
      .executeTakeFirst();
    return inserted === undefined;
  }

  async release(principal: string, requestId: string): Promise<void> {
    await this.db.deleteFrom('agent_claims').where('principal', '=', principal).where('request_id', '=', requestId).execute();
  }

  /**
   * Merges a principal's records from an older `herald mcp`'s file: a known message keeps the larger
   * seq, a known edit or claim stays as it is; expired ones are skipped. The same import again changes nothing.
   */
  async import(principal: string, records: ImportedRecords): Promise<{ messages: number; claims: number }> {
    const cutoff = this.cutoff().getTime();
    const live = (at: string): boolean => Date.parse(at) > cutoff;
    // A time after now is no file's honest record: it is taken as now, so the 8-day retention holds
    // for it too (a time far ahead would outlive every sweep).
    const now = this.clock.now().getTime();
    const when = (at: string): Date => new Date(Math.min(Date.parse(at), now));
    let messages = 0;
    let claims = 0;
    await this.db.transaction().execute(async (trx) => {
      for (const [requestId, m] of Object.entries(records.messages)) {
        if (!live(m.sent_at)) continue;
        const seq = Math.max(m.seq, ...Object.values(m.edits ?? {}));
        await trx
          .insertInto('agent_messages')
          .values({ principal, request_id: requestId, kind: m.kind, seq, sent_at: when(m.sent_at) })
          .onConflict((oc) => oc.columns(['principal', 'request_id']).doUpdateSet({ seq: sql<number>`greatest(agent_messages.seq, excluded.seq)` }))
          .execute();
        for (const [editId, editSeq] of Object.entries(m.edits ?? {})) {
          await trx
            .insertInto('agent_message_edits')
            .values({ principal, request_id: requestId, edit_id: editId, seq: editSeq, at: when(m.sent_at) })
            .onConflict((oc) => oc.columns(['principal', 'request_id', 'edit_id']).doNothing())
            .execute();
        }
        messages += 1;
      }
      for (const [requestId, at] of Object.entries(records.sent ?? {})) {
        if (!live(at)) continue;
        await trx.insertInto('agent_claims').values({ principal, request_id: requestId, claimed_at: when(at) }).onConflict((oc) => oc.columns(['principal', 'request_id']).doNothing()).execute();
        claims += 1;
      }
    });
    return { messages, claims };
  }

  /** Every so often, every principal's expired records go (principals come and go: an OAuth client minted for one session). */
  private async sweep(): Promise<void> {
    const now = this.clock.now().getTime();
    if (now - this.sweptAt < SWEEP_EVERY_MS) return;
    this.sweptAt = now;
    const cutoff = this.cutoff();
    await this.db.deleteFrom('agent_messages').where('sent_at', '<=', cutoff).execute();
    await this.db.deleteFrom('agent_message_edits').where('at', '<=', cutoff).execute();
    await this.db.deleteFrom('agent_claims').where('claimed_at', '<=', cutoff).execute();
  }
}
