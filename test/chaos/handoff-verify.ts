import { deliveryNonce } from '../../src/modules/deliveries/delivery.js';
import { handoffDeliveryId } from '../../src/modules/handoffs/handoff.service.js';
import type { SandboxMessage } from '../../src/platforms/discord/sandbox/sandbox.js';
import type { Direction, ReadItem, SentHandoffTrack, SentJson } from './handoff-agents.js';
import { zeroCounts, type PhaseCounts, type Violation, type ViolationKind } from './verify.js';

/**
 * The verdict of the handoff phase. Every handoff message in the sandbox is tied to the handoff
 * whose nonce it carries (Herald sends a handoff as a delivery whose id is derived from the
 * request_id, and the nonce from that id), and every inbox item each bot's agent read to the
 * handoff whose envelope event_id it carries. Then, per handoff: its final state as its sender's
 * bridge answers it; exactly one message for a delivered one (by its source bot, in the channel
 * asked for, mentioning the target, at the url reported, the envelope keeping the event_id and the
 * text); none for a failed one; and exactly one inbox item at the target bot (none at the source),
 * with the source, origin, handoff message and text as sent.
 */

/** What the sender's bridge answered at the end (GET /mcp/handoffs/{request_id}). */
export type FinalHandoff = { status: 200; handoff: SentJson } | { status: 404 } | { status: 'error'; detail: string };

/** Why a handoff in Discord never reached the other bot's inbox, as far as the phase can tell. */
export interface ReceiptStory {
  cause: string;
  lines: string[];
}

export interface HandoffVerifyInput {
  sent: SentHandoffTrack[];
  finals: Map<string, FinalHandoff>;
  /** Every message of the sandbox. */
  messages: SandboxMessage[];
  /** Every inbox item the bots' agents read, during the run and listed at the end. */
  reads: ReadItem[];
  /** handoff_inbox rows of each bot's database (acknowledged ones too), for evidence. */
  inboxRows: { a: Record<string, unknown>[]; b: Record<string, unknown>[] };
  bots: { a: string; b: string };
  /** The sender's delivery rows by the handoff's request_id. */
  rows: Map<string, Record<string, unknown>>;
  /** The sending bot's log lines about this handoff. */
  senderLog(t: SentHandoffTrack): string[];
  /** What the receiving bot was doing when this message was posted. */
  receiptStory(receiver: 'a' | 'b', message: SandboxMessage): ReceiptStory;
}

export interface HandoffVerdict {
  counts: PhaseCounts;
  violations: Violation[];
  /** One `kind handoff-…: sent N, duplicates N, lost N, stuck N, misattributed N` line per direction. */
  kindLines: string[];
  notes: string[];
}

const SCHEMA = '"schema":"openab.multibot.handoff.v1"';
export const DIRECTIONS: readonly Direction[] = ['a-to-b', 'b-to-a'];

/** The nonce a handoff's message carries. */
export function handoffNonce(requestId: string): string {
  return deliveryNonce(handoffDeliveryId(requestId));
}

function envelopeOf(m: SandboxMessage): Record<string, unknown> | undefined {
  const newline = m.content.indexOf('\n');
  if (newline < 0) return undefined;
  try {
    const value: unknown = JSON.parse(m.content.slice(newline + 1));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export function verifyHandoffs(input: HandoffVerifyInput): HandoffVerdict {
  const { sent, finals, bots } = input;
  const handoffMessages = input.messages.filter((m) => m.content.startsWith('<@') && m.content.includes(SCHEMA));
  const nonceOwner = new Map(sent.map((t) => [handoffNonce(t.requestId), t.requestId]));
  const byNonce = new Map<string, SandboxMessage[]>();
  for (const m of handoffMessages) {
    const key = m.nonce === undefined ? '' : String(m.nonce);
    byNonce.set(key, [...(byNonce.get(key) ?? []), m]);
  }
  const eventOwner = new Map<string, string>();
  for (const t of sent) if (t.eventId !== undefined) eventOwner.set(t.eventId.toLowerCase(), t.requestId);
  const readsByEvent = new Map<string, ReadItem[]>();
  for (const r of input.reads) {
    const key = r.item.event_id.toLowerCase();
    readsByEvent.set(key, [...(readsByEvent.get(key) ?? []), r]);
  }
  const nameOf = (id: string) => (id === bots.a ? 'a' : id === bots.b ? 'b' : id);

  const violations: Violation[] = [];
  const flagged = new Map<ViolationKind, Set<string>>();
  const describe = (m: SandboxMessage) => ({
    id: m.id,
    channel_id: m.channel_id,
    author: nameOf(m.author.id),
    created: m.timestamp,
    nonce_of: m.nonce !== undefined ? (nonceOwner.get(String(m.nonce)) ?? 'no handoff') : 'no nonce',
    event_id: envelopeOf(m)?.['event_id'],
  });
  const byRequest = new Map(sent.map((t) => [t.requestId, t]));
  const flag = (kind: ViolationKind, requestIds: string[], detail: string, extra: { messages?: SandboxMessage[]; reads?: ReadItem[]; receipt?: ReceiptStory } = {}) => {
    const set = flagged.get(kind) ?? new Set<string>();
    flagged.set(kind, set);
    for (const id of requestIds) set.add(id);
    const handoffs = requestIds.map((id) => {
      const t = byRequest.get(id);
      const row = input.rows.get(id);
      return {
        request_id: id,
        direction: t?.direction,
        event_id: t?.eventId,
        channel_id: t?.channelId,
        in_thread: t?.inThread,
        final: finals.get(id),
        // The form report.ts prints: the sender's row and the agent's last steps.
        row: row === undefined ? undefined : { status: row['status'], attempts: row['attempts'], message_id: row['message_id'], reason: row['reason'] },
        connector: t === undefined ? undefined : { accepted: t.accepted, posts: t.posts, failed_reposts: t.failedReposts, gave_up: t.gaveUp, timeline: t.timeline },
      };
    });
    const own = requestIds.flatMap((id) => byNonce.get(handoffNonce(id)) ?? []);
    const senderLog = requestIds.flatMap((id) => {
      const t = byRequest.get(id);
      return t === undefined ? [] : input.senderLog(t);
    });
    violations.push({
      kind,
      requestIds,
      detail: extra.receipt !== undefined ? `${detail}; ${extra.receipt.cause}` : detail,
      evidence: {
        deliveries: handoffs,
        messages: [...new Set([...(extra.messages ?? []), ...own])].map(describe),
        inbox: (extra.reads ?? []).map((r) => ({ bot: r.bot, ...r.item, read_at: new Date(r.readAt).toISOString(), reads: r.reads, acked: r.acked })),
        herald_log: senderLog,
        // The receiving bot's side: its gateway holder and its lines about the message.
        gateway_log: extra.receipt?.lines ?? [],
      },
    });
  };

  const counts = zeroCounts({ deliveries: sent.length, posts: 0, dms: 0, edits: 0, messages: handoffMessages.length });

  const failedNotes: string[] = [];
  const causes = new Map<string, number>();
  let unknownSeen = 0;
  let rereads = 0;
  for (const t of sent) {
    const f = finals.get(t.requestId);
    const h = f?.status === 200 ? f.handoff : undefined;
    if (h === undefined) counts.states.missing += 1;
    else counts.states[h.state] += 1;
    if (t.timeline.some((line) => line.includes('→ unknown'))) unknownSeen += 1;
    if (t.vanished !== undefined) flag('lost', [t.requestId], `accepted, then forgotten or changed by the sender's bridge: ${t.vanished}`);
    if (t.regressed !== undefined) flag('lost', [t.requestId], `changed after delivery: ${t.regressed}`);
    if (f?.status === 404) {
      if (t.accepted) flag('lost', [t.requestId], 'accepted (202), but the sender answers 404 unknown request_id at the end');
      else flag('stuck', [t.requestId], 'never acknowledged by the sender, however often it was POSTed');
    } else if (f?.status === 'error' || f === undefined) flag('stuck', [t.requestId], `no final state: ${f?.status === 'error' ? f.detail : 'not asked'}`);
    else if (h?.state === 'pending' || h?.state === 'unknown') {
      const row = input.rows.get(t.requestId);
      flag('stuck', [t.requestId], `still ${h.state} after settling (row: ${String(row?.['status'] ?? '-')}, reason ${JSON.stringify(row?.['reason'] ?? null)})`);
    }
    if (h !== undefined && t.eventId !== undefined && h.event_id !== t.eventId) flag('misattributed', [t.requestId], `the final answer names event ${h.event_id}, the first 202 named ${t.eventId}`);

    // Its messages in Discord.
    const own = byNonce.get(handoffNonce(t.requestId)) ?? [];
    if (own.length > 1) {
      counts.extraMessages += own.length - 1;
      flag('duplicate', [t.requestId], `${own.length} handoff messages carry its nonce`, { messages: own });
    }
    for (const m of own) {
      const e = envelopeOf(m);
      const wrong: string[] = [];
      if (m.author.id !== t.sourceBotId) wrong.push(`author ${nameOf(m.author.id)}`);
      if (m.channel_id !== t.channelId) wrong.push(`channel ${m.channel_id} (asked ${t.channelId})`);
      if (!m.content.startsWith(`<@${t.targetBotId}>\n`)) wrong.push('the first line is not the target mention');
      if (e?.['event_id'] !== t.eventId) wrong.push(`event_id ${String(e?.['event_id'])} (the bridge said ${t.eventId ?? 'none'})`);
      if ((e?.['payload'] as { text?: unknown } | undefined)?.text !== t.text) wrong.push('payload text differs from the text sent');
      if (e?.['origin_thread_id'] !== (t.inThread ? t.channelId : null)) wrong.push(`origin_thread_id ${String(e?.['origin_thread_id'])}`);
      if (wrong.length > 0) flag('misattributed', [t.requestId], `its message ${m.id}: ${wrong.join('; ')}`, { messages: [m] });
    }
    if (h?.state === 'failed' && own.length > 0) flag('failed-but-sent', [t.requestId], `reported failed ${h.code ?? ''} but ${own.length} message(s) carry its nonce`, { messages: own });
    if (h?.state === 'failed') {
      const row = input.rows.get(t.requestId);
      failedNotes.push(`${t.requestId.slice(0, 12)} (${t.direction}): failed ${h.code ?? ''} (${String(row?.['reason'] ?? 'no reason')}), ${t.failedReposts} re-POSTs after failed`);
    }
    const message = own[0];
    if (h?.state === 'delivered') {
      if (message === undefined) flag('lost', [t.requestId], `delivered at ${h.url ?? '(no url)'}, but no message in Discord carries its nonce`);
      else if (h.url === undefined || !h.url.endsWith(`/${message.channel_id}/${message.id}`)) flag('misattributed', [t.requestId], `delivered at ${h.url ?? '(no url)'}, but its message is ${message.channel_id}/${message.id}`, { messages: [message] });
    }

    // The other bot's inbox (and never the sender's own).
    const receiver = t.direction === 'a-to-b' ? 'b' : 'a';
    const reads = t.eventId === undefined ? [] : (readsByEvent.get(t.eventId.toLowerCase()) ?? []);
    const atReceiver = reads.filter((r) => r.bot === receiver);
    rereads += atReceiver.reduce((n, r) => n + r.reads - 1, 0);
    const elsewhere = reads.filter((r) => r.bot !== receiver);
    if (elsewhere.length > 0) flag('misattributed', [t.requestId], `taken in by its own sender (${elsewhere.map((r) => `${r.bot}:${r.item.id}`).join(', ')})`, { reads: elsewhere });
    if (atReceiver.length > 1) flag('duplicate', [t.requestId], `${atReceiver.length} inbox items at ${receiver} carry its event_id (${atReceiver.map((r) => r.item.id).join(', ')})`, { reads: atReceiver });
    for (const r of atReceiver) {
      const wrong: string[] = [];
      if (r.item.source_bot_id !== t.sourceBotId) wrong.push(`source ${nameOf(r.item.source_bot_id)}`);
      if (r.item.text !== t.text) wrong.push('text differs from the text sent');
      if (r.item.origin.channel_id !== t.channelId) wrong.push(`origin channel ${r.item.origin.channel_id} (sent in ${t.channelId})`);
      if (r.item.origin.thread_id !== (t.inThread ? t.channelId : null)) wrong.push(`origin thread ${String(r.item.origin.thread_id)}`);
      if (message !== undefined && r.item.origin.handoff_message_id !== message.id) wrong.push(`handoff_message_id ${r.item.origin.handoff_message_id} (its message is ${message.id})`);
      if (wrong.length > 0) flag('misattributed', [t.requestId], `inbox item ${receiver}:${r.item.id}: ${wrong.join('; ')}`, { reads: [r], messages: message !== undefined ? [message] : [] });
    }
    if (atReceiver.length > 0 && own.length === 0) flag('failed-but-sent', [t.requestId], `received by ${receiver} though no message carries its nonce (state ${h?.state ?? 'none'})`, { reads: atReceiver });
    if (message !== undefined && atReceiver.length === 0) {
      const story = input.receiptStory(receiver, message);
      causes.set(story.cause, (causes.get(story.cause) ?? 0) + 1);
      flag('lost', [t.requestId], `its message ${message.id} is in Discord (${h?.state ?? 'no state'}), but ${receiver} never took it in (no inbox item carries event ${t.eventId ?? '?'})`, { messages: [message], receipt: story });
    }
  }

  // Messages and inbox items no handoff accounts for.
  for (const m of handoffMessages) {
    if (m.nonce === undefined || !nonceOwner.has(String(m.nonce))) {
      counts.orphans += 1;
      violations.push({ kind: 'orphan', requestIds: [], detail: `handoff message ${m.id} in ${m.channel_id} by ${nameOf(m.author.id)} carries ${m.nonce === undefined ? 'no nonce' : 'the nonce of no handoff'}`, evidence: { messages: [describe(m)] } });
    }
  }
  for (const r of input.reads) {
    if (!eventOwner.has(r.item.event_id.toLowerCase())) {
      counts.orphans += 1;
      violations.push({ kind: 'orphan', requestIds: [], detail: `inbox item ${r.bot}:${r.item.id} carries event ${r.item.event_id} of no handoff`, evidence: { inbox: [{ bot: r.bot, ...r.item }] } });
    }
  }

  counts.duplicates = flagged.get('duplicate')?.size ?? 0;
  counts.lost = flagged.get('lost')?.size ?? 0;
  counts.stuck = flagged.get('stuck')?.size ?? 0;
  counts.misattributed = flagged.get('misattributed')?.size ?? 0;
  counts.failedButSent = flagged.get('failed-but-sent')?.size ?? 0;

  const kindLines = DIRECTIONS.map((d) => {
    const ids = new Set(sent.filter((t) => t.direction === d).map((t) => t.requestId));
    const n = (kind: ViolationKind) => [...(flagged.get(kind) ?? [])].filter((id) => ids.has(id)).length;
    return `kind handoff-${d}: sent ${ids.size}, duplicates ${n('duplicate')}, lost ${n('lost')}, stuck ${n('stuck')}, misattributed ${n('misattributed')}`;
  });
  const received = (bot: 'a' | 'b') => input.reads.filter((r) => r.bot === bot).length;
  const rowsOf = (bot: 'a' | 'b') => input.inboxRows[bot].length;
  const notes = [
    `handoffs: ${handoffMessages.length} handoff messages in Discord; inbox items read: a ${received('a')}, b ${received('b')} (database rows: a ${rowsOf('a')}, b ${rowsOf('b')}); ${rereads} re-reads of one item after an acknowledgement got no answer (not duplicates); ${unknownSeen} handoffs seen unknown along the way`,
    `handoffs failed: ${failedNotes.length} (not violations when no message carries their nonce)`,
    ...failedNotes.slice(0, 6).map((n) => `  - ${n}`),
    ...(causes.size > 0 ? [`handoffs in Discord never taken in by the other bot, by cause: ${[...causes].map(([k, v]) => `${k} ${v}`).join(', ')}`] : []),
  ];
  return { counts, violations, kindLines, notes };
}
