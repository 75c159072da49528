import type { SandboxMessage } from '../../src/platforms/discord/sandbox/sandbox.js';
import type { ChatLine, ChatSendJson, CommandAsk, SlashAsk } from './discord-chat-connector.js';
import type { PhaseCounts, Violation, ViolationKind } from './verify.js';

/**
 * The verdict of the discord-chat phase, from the sandbox Discord's messages:
 * - chat lines: a line's message is the bot's `**sender**: text` (every line's text is unique);
 *   exactly one per delivered line, in the channel it named, under its sender, the one its
 *   `message_ids` names; none for a failed one; `unconfirmed` is allowed (never sent again by
 *   Herald) and counted apart with what the channel shows; nothing pending at the end;
 * - command replies (`responseMode: discord`): the reply carries the nonce Herald derives from the
 *   reply's request_id (itself derived from the idempotency key), so each ask has exactly one
 *   reply in its channel once its answer was ok, none when it was refused, and every ask ends
 *   with a final answer (not `in_progress`);
 * - slash commands through the gateway: each interaction answered at most once (a second
 *   callback is refused by the sandbox: 40060, counted as a duplicate answer).
 */

/** The chat send at the end, from an API-only Herald: 200 with its state, 404, or an error. */
export type ChatFinal = { status: 200; send: ChatSendJson } | { status: 404 } | { status: 'error'; detail: string };

export interface DiscordChatVerifyInput {
  lines: ChatLine[];
  chatFinals: Map<string, ChatFinal>;
  asks: CommandAsk[];
  /** The reply deliveries' rows (request_id → row), and the command_runs rows (key → row). */
  rows: Map<string, Record<string, unknown>>;
  runs: Map<string, Record<string, unknown>>;
  slashes: SlashAsk[];
  /** Interaction callbacks the sandbox refused as already answered (a second answer). */
  duplicateCallbacks: number;
  /** Times (ms since the phase began) the gateway was down or moving: an unanswered interaction then is a clear failure. */
  disrupted(fromMs: number, untilMs: number): boolean;
  messages: SandboxMessage[];
  botId: string;
  logsFor(requestIds: string[]): string[];
}

export interface KindCounts {
  sent: number;
  duplicates: number;
  lost: number;
  stuck: number;
  misattributed: number;
  failedButSent: number;
}

export interface DiscordChatVerdict {
  counts: PhaseCounts;
  violations: Violation[];
  chat: KindCounts & { delivered: number; failed: number; unconfirmed: number; pending: number };
  replies: KindCounts & { delivered: number; refused: number; failed: number; slash: number; slashAnswered: number; slashUnanswered: number; slashNotConnected: number; duplicateCallbacks: number };
  unconfirmedNotes: string[];
  refusedNotes: string[];
  orphans: number;
}

const SIGNED = /^\*\*([^*\n]{1,32})\*\*: ([\s\S]*)$/;

export function verifyDiscordChat(input: DiscordChatVerifyInput): DiscordChatVerdict {
  const bot = input.messages.filter((m) => m.author.id === input.botId);
  const byText = new Map<string, SandboxMessage[]>();
  const byNonce = new Map<string, SandboxMessage[]>();
  for (const m of bot) {
    const signed = SIGNED.exec(m.content);
    if (signed !== null) byText.set(signed[2] ?? '', [...(byText.get(signed[2] ?? '') ?? []), m]);
    if (m.nonce !== undefined) byNonce.set(String(m.nonce), [...(byNonce.get(String(m.nonce)) ?? []), m]);
  }
  const violations: Violation[] = [];
  const flagged = new Map<string, Set<string>>();
  const describe = (m: SandboxMessage) => ({ id: m.id, channel_id: m.channel_id, content: m.content.slice(0, 160), nonce: m.nonce, created: m.timestamp });
  const flag = (kind: ViolationKind, what: 'chat' | 'reply', id: string, detail: string, shown: SandboxMessage[], evidence: Record<string, unknown>, logIds: string[]) => {
    const set = flagged.get(`${what}/${kind}`) ?? new Set<string>();
    flagged.set(`${what}/${kind}`, set);
    set.add(id);
    violations.push({ kind, requestIds: [id], detail: `${what === 'chat' ? 'chat line' : 'command reply'}: ${detail}`, evidence: { ...evidence, messages: shown.map(describe), herald_log: input.logsFor(logIds) } });
  };

  // Chat lines.
  const chat = { sent: input.lines.length, duplicates: 0, lost: 0, stuck: 0, misattributed: 0, failedButSent: 0, delivered: 0, failed: 0, unconfirmed: 0, pending: 0 };
  const unconfirmedNotes: string[] = [];
  const accounted = new Set<string>();
  for (const line of input.lines) {
    const own = byText.get(line.text) ?? [];
    for (const m of own) accounted.add(m.id);
    const final = input.chatFinals.get(line.id);
    const row = input.rows.get(`chat:${line.id}`);
    const evidence = { line: { id: line.id, sender: line.sender, channel: line.channelArg, channel_id: line.channelId, accepted: line.accepted, posts: line.posts, timeline: line.timeline }, final, row };
    const v = (kind: ViolationKind, detail: string, shown: SandboxMessage[] = own) => flag(kind, 'chat', line.id, detail, shown, evidence, [`chat:${line.id}`]);
    if (line.vanished !== undefined) v('lost', `accepted, then forgotten by the bridge: ${line.vanished}`);
    if (line.regressed !== undefined) v('lost', `its final state changed: ${line.regressed}`);
    if (own.length > 1) v('duplicate', `${own.length} messages carry its text`);
    for (const m of own) {
      const sender = SIGNED.exec(m.content)?.[1];
      if (m.channel_id !== line.channelId || sender !== line.sender) v('misattributed', `message ${m.id} is in ${m.channel_id} under ${String(sender)}, expected ${line.channelId} under ${line.sender}`, [m]);
    }
    if (final === undefined || final.status === 'error') {
      chat.pending += 1;
      v('stuck', `no final state: ${final?.status === 'error' ? final.detail : 'not asked'}`);
      continue;
    }
    if (final.status === 404) {
      chat.pending += 1;
      v(line.accepted ? 'lost' : 'stuck', line.accepted ? 'accepted (202), but 404 at the end' : 'never acknowledged by the bridge, however often it was POSTed');
      continue;
    }
    const send = final.send;
    switch (send.state) {
      case 'pending':
        chat.pending += 1;
        v('stuck', `still pending after settling (row ${String(row?.['status'] ?? '-')}, reason ${JSON.stringify(row?.['reason'] ?? null)})`);
        break;
      case 'delivered': {
        chat.delivered += 1;
        if (own.length === 0) v('lost', `delivered (${JSON.stringify(send.message_ids ?? [])}), but no message carries its text`);
        else if (!own.some((m) => send.message_ids?.includes(m.id) === true)) v('misattributed', `delivered as ${JSON.stringify(send.message_ids ?? [])}, but its message is ${own.map((m) => m.id).join(', ')}`);
        if (send.sender !== line.sender) v('misattributed', `reported under sender ${send.sender}, sent as ${line.sender}`);
        break;
      }
      case 'failed':
        chat.failed += 1;
        if (own.length > 0) v('failed-but-sent', `reported failed (${send.reason ?? 'no reason'}), but ${own.length} message(s) carry its text`);
        break;
      case 'unconfirmed':
        // Allowed by the contract (Herald could not tell, and will not send it again): counted
        // apart, with what the channel shows (0 or 1 message; 2 is already a duplicate above).
        chat.unconfirmed += 1;
        unconfirmedNotes.push(`${line.id} (${line.sender} → ${line.channelArg}): unconfirmed, ${own.length} message(s) in the channel; reason: ${send.reason ?? String(row?.['reason'] ?? 'none given')}`);
        // The first few with Herald's own words about them (what it tried, why it could not tell).
        if (chat.unconfirmed <= 3) for (const l of input.logsFor([`chat:${line.id}`]).slice(-4)) unconfirmedNotes.push(`    ${l.slice(0, 400)}`);
        break;
    }
  }

  // Command replies.
  const replies = { sent: input.asks.length, duplicates: 0, lost: 0, stuck: 0, misattributed: 0, failedButSent: 0, delivered: 0, refused: 0, failed: 0, slash: input.slashes.length, slashAnswered: 0, slashUnanswered: 0, slashNotConnected: 0, duplicateCallbacks: input.duplicateCallbacks };
  const refusedNotes: string[] = [];
  for (const ask of input.asks) {
    const own = byNonce.get(ask.replyNonce) ?? [];
    for (const m of own) accounted.add(m.id);
    const row = input.rows.get(ask.replyRequestId);
    const run = input.runs.get(ask.key);
    const evidence = { ask: { key: ask.key, channel_id: ask.channelId, source: ask.sourceMessageId, reply_request_id: ask.replyRequestId, runs: ask.runs, answers: ask.answers, timeline: ask.timeline }, result: ask.result, reply_row: row, command_run: run };
    const v = (kind: ViolationKind, detail: string, shown: SandboxMessage[] = own) => flag(kind, 'reply', ask.key, detail, shown, evidence, [ask.replyRequestId]);
    if (own.length > 1) v('duplicate', `${own.length} messages carry the reply's nonce`);
    for (const m of own) if (m.channel_id !== ask.channelId) v('misattributed', `reply ${m.id} is in ${m.channel_id}, asked in ${ask.channelId}`, [m]);
    const result = ask.result;
    if (result === undefined) {
      // The agent never got a final answer: the key still answers in_progress (or nothing answered).
      v('stuck', `no final answer after ${ask.runs} runs (answers: ${ask.answers.slice(-5).join(', ') || 'none'}); command_runs row ${String(run?.['status'] ?? 'absent')}; ${own.length} reply message(s) in Discord; reply row ${String(row?.['status'] ?? 'absent')}`);
      continue;
    }
    const delivery = result.outputs[0]?.delivery;
    if (!result.ok || delivery === undefined) {
      replies.refused += 1;
      refusedNotes.push(`${ask.key.slice(0, 14)}: ${result.error?.category ?? 'ok without a reply'} (${(result.error?.reason ?? '').slice(0, 100)})`);
      if (own.length > 0) v('failed-but-sent', `answered ${result.error?.category ?? 'without a delivery'}, but ${own.length} reply message(s) were posted`);
      continue;
    }
    if (delivery.request_id !== ask.replyRequestId) v('misattributed', `the reply's request_id is ${delivery.request_id}, expected ${ask.replyRequestId}`);
    const state = String(row?.['status'] ?? 'absent');
    if (state === 'delivered') {
      replies.delivered += 1;
      if (own.length === 0) v('lost', 'the reply is delivered, but no message carries its nonce');
      else if (!own.some((m) => m.id === String(row?.['message_id']))) v('misattributed', `delivered as message ${String(row?.['message_id'])}, but its message is ${own.map((m) => m.id).join(', ')}`);
    } else if (state === 'failed') {
      if (own.length > 0) v('failed-but-sent', `the reply failed (${String(row?.['reason'] ?? '')}), but ${own.length} message(s) carry its nonce`);
      // Failed after its attempts, with no message: the outcome a post has under the same faults,
      // reported as such (the agent reads it by the delivery's request_id), not a loss.
      else if (row?.['failure_code'] === 'UPSTREAM_UNAVAILABLE') {
        replies.failed += 1;
        refusedNotes.push(`${ask.key.slice(0, 14)}: reply failed ${String(row['failure_code'])} (${String(row['reason'] ?? '').slice(0, 100)}), no message`);
      } else v('lost', `the agent was answered ok, but its reply failed: ${String(row?.['failure_code'] ?? '')} ${String(row?.['reason'] ?? '')}`);
    } else {
      v('stuck', `the reply is ${state} after settling (reason ${JSON.stringify(row?.['reason'] ?? null)}); ${own.length} message(s) carry its nonce`);
    }
  }
  for (const s of input.slashes) {
    if (s.outcome === 'answered') replies.slashAnswered += 1;
    else if (s.outcome === 'not connected') replies.slashNotConnected += 1;
    else {
      replies.slashUnanswered += 1;
      // Unanswered while the gateway stayed put (no session lost, no holder killed, PostgreSQL up): lost.
      if (!input.disrupted(s.at, s.endedAt)) {
        const set = flagged.get('reply/lost') ?? new Set<string>();
        flagged.set('reply/lost', set);
        set.add(`slash-${s.n}`);
        violations.push({ kind: 'lost', requestIds: [], detail: `slash command #${s.n} (agent ${s.connector}, ${(s.at / 1000).toFixed(1)}s–${(s.endedAt / 1000).toFixed(1)}s) ${s.outcome} while the gateway stayed up: ${s.detail}` });
      }
    }
  }
  if (input.duplicateCallbacks > 0) {
    violations.push({ kind: 'duplicate', requestIds: [], detail: `${input.duplicateCallbacks} interaction callback(s) refused as already answered (two answers to one interaction)` });
  }

  // Bot messages nothing accounts for.
  let orphans = 0;
  for (const m of bot) {
    if (accounted.has(m.id)) continue;
    orphans += 1;
    violations.push({ kind: 'orphan', requestIds: [], detail: `bot message ${m.id} in ${m.channel_id} is no chat line's and no reply's`, evidence: { messages: [describe(m)] } });
  }

  const size = (key: string) => flagged.get(key)?.size ?? 0;
  chat.duplicates = size('chat/duplicate');
  chat.lost = size('chat/lost');
  chat.stuck = size('chat/stuck');
  chat.misattributed = size('chat/misattributed');
  chat.failedButSent = size('chat/failed-but-sent');
  replies.duplicates = size('reply/duplicate') + (input.duplicateCallbacks > 0 ? input.duplicateCallbacks : 0);
  replies.lost = size('reply/lost');
  replies.stuck = size('reply/stuck');
  replies.misattributed = size('reply/misattributed');
  replies.failedButSent = size('reply/failed-but-sent');

  const counts: PhaseCounts = {
    deliveries: input.lines.length + input.asks.length,
    posts: input.lines.length,
    dms: 0,
    edits: 0,
    messages: bot.length,
    duplicates: chat.duplicates + replies.duplicates,
    extraMessages: 0,
    lost: chat.lost + replies.lost,
    stuck: chat.stuck + replies.stuck,
    misattributed: chat.misattributed + replies.misattributed,
    editOrder: 0,
    failedButSent: chat.failedButSent + replies.failedButSent,
    orphans,
    undecided: 0,
    // unknown: chat lines ended unconfirmed (allowed, counted apart); failed: chat lines failed
    // and commands refused; pending: neither final.
    states: { delivered: chat.delivered + replies.delivered, failed: chat.failed + replies.refused, unknown: chat.unconfirmed, pending: chat.pending + replies.stuck, missing: 0 },
    failedUnmapped: 0,
    appliedEdits: 0,
    unappliedEdits: 0,
  };
  for (const list of byText.values()) if (list.length > 1) counts.extraMessages += list.length - 1;
  for (const list of byNonce.values()) if (list.length > 1 && !list.every((m) => SIGNED.test(m.content))) counts.extraMessages += list.length - 1;
  return { counts, violations, chat, replies, unconfirmedNotes, refusedNotes, orphans };
}
