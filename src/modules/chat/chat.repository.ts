import { sql, type Kysely } from 'kysely';
import { LeasedTable } from '../../outbox/leased-table.js';
import type { Database } from '../../schema.js';
import type { ChatSendRow } from './chat.table.js';

type Db = Kysely<Database>;

/** Insert a send unless its id exists; returns the row stored under the id either way. */
export async function insertSend(db: Db, row: Omit<ChatSendRow, 'attempts'>): Promise<{ row: ChatSendRow; created: boolean }> {
  const inserted = await db.insertInto('chat_sends').values(row).onConflict((oc) => oc.column('id').doNothing()).returningAll().executeTakeFirst();
  if (inserted !== undefined) return { row: inserted, created: true };
  return { row: await db.selectFrom('chat_sends').selectAll().where('id', '=', row.id).executeTakeFirstOrThrow(), created: false };
}

export async function findSend(db: Db, id: string): Promise<ChatSendRow | undefined> {
  return db.selectFrom('chat_sends').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * The chat_sends queue: due are pending sends whose time has come and in-flight ones whose lease
 * expired; a release makes a send pending and due now.
 */
export function chatSendsTable(db: Db): LeasedTable<ChatSendRow> {
  return new LeasedTable<ChatSendRow>(db as unknown as Kysely<unknown>, {
    table: 'chat_sends',
    key: 'id',
    orderBy: 'next_attempt_at',
    due: (now) => sql`(status = 'pending' and next_attempt_at <= ${now}) or (status = 'in_flight' and lease_expires_at <= ${now})`,
    onClaim: () => ({ status: sql`'in_flight'` }),
    held: sql`status = 'in_flight'`,
    onRelease: (now) => ({ status: sql`'pending'`, next_attempt_at: sql`${now}` }),
  });
}

/** How far back another send may have created a message this one's proof could mistake for its own. */
const TWIN_LOOKBACK_MS = 10 * 60_000;

/** Of `messageIds`, those another chat send in the same channel recorded as its own. */
export async function takenMessageIds(db: Db, row: ChatSendRow, messageIds: readonly string[]): Promise<Set<string>> {
  if (messageIds.length === 0) return new Set();
  const others = await db
    .selectFrom('chat_sends')
    .select('message_ids')
    .where('transport', '=', row.transport)
    .where('channel', '=', row.channel)
    .where('id', '!=', row.id)
    .where('message_ids', 'is not', null)
    .where('created_at', '>=', new Date(row.created_at.getTime() - TWIN_LOOKBACK_MS))
    .execute();
  const wanted = new Set(messageIds);
  const taken = new Set<string>();
  for (const o of others) for (const id of JSON.parse(o.message_ids ?? '[]') as string[]) if (wanted.has(id)) taken.add(id);
  return taken;
}

/** Whether another send of the same text, by the same sender to the same channel, is not settled with its ids. */
export async function hasUnsettledTwin(db: Db, row: ChatSendRow): Promise<boolean> {
  const twin = await db
    .selectFrom('chat_sends')
    .select('id')
    .where('transport', '=', row.transport)
    .where('channel', '=', row.channel)
    .where('sender', '=', row.sender)
    .where('text', '=', row.text)
    .where('id', '!=', row.id)
    .where('message_ids', 'is', null)
    .where('status', 'in', ['pending', 'in_flight', 'unconfirmed'])
    .where('created_at', '>=', new Date(row.created_at.getTime() - TWIN_LOOKBACK_MS))
    .executeTakeFirst();
  return twin !== undefined;
}
