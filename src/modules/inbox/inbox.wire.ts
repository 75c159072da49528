import type { components } from '../../../generated/api.js';
import type { InboxEventRow } from './inbox.table.js';

export type InboxEvent = components['schemas']['InboxEvent'];

/** An event as the contract shows it. */
export function toWire(row: InboxEventRow): InboxEvent {
  const event: InboxEvent = {
    id: row.id,
    event_id: row.event_id,
    kind: row.kind,
    platform: row.platform,
    channel_id: row.channel_id,
    guild_id: row.guild_id,
    thread_id: row.thread_id,
    message_id: row.message_id,
    author: { id: row.author_id, name: row.author_name, bot: row.author_bot },
    reply_to: row.reply_to,
    content: row.content,
    attachments: JSON.parse(row.attachments) as InboxEvent['attachments'],
    created_at: row.created_at.toISOString(),
    received_at: row.received_at.toISOString(),
  };
  if (row.reaction !== null) event.reaction = row.reaction;
  if (row.handoff !== null) event.handoff = JSON.parse(row.handoff) as NonNullable<InboxEvent['handoff']>;
  return event;
}
