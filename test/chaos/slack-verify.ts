import { deliveryNonce } from '../../src/modules/deliveries/delivery.js';
import type { SlackMessage } from '../../src/platforms/slack/sandbox/sandbox.js';
import type { StateJson, Tracked } from './connector.js';
import { zeroCounts, type FinalState, type PhaseCounts, type Violation, type ViolationKind } from './verify.js';

/**
 * The verdict of the Slack phase: every message in the Slack sandbox is tied to the delivery whose
 * key its metadata carries (`herald_delivery`, payload id = deliveryNonce(request_id): the key
 * Herald marks each send with), and every delivery's final state is checked against them: exactly
 * one message for each delivered post, in its destination's channel, at the permalink it reports;
 * none for a failed one; nothing left pending or unknown.
 */

/** A sandbox message and the channel it is in. */
export type SlackChannelMessage = SlackMessage & { channel: string };

export interface SlackVerifyInput {
  tracked: Tracked[];
  finals: Map<string, FinalState>;
  messages: SlackChannelMessage[];
  /** The Slack channel a post's destination is mapped to, for the guild it names. */
  channelOf(t: Tracked): string | undefined;
  /** The bot user a delivery's messages must come from (its agent's identity's, in its workspace). */
  botOf(t: Tracked): string | undefined;
  /** The workspace url of a message's channel (permalinks start with it), with a trailing slash. */
  workspaceUrlOf(channel: string): string;
  rows: Map<string, Record<string, unknown>>;
  logsFor(requestIds: string[]): string[];
}

/** The key a message carries in its metadata, if Herald marked it. */
export function keyOf(m: SlackMessage): string | undefined {
  if (m.metadata?.event_type !== 'herald_delivery') return undefined;
  const id = m.metadata.event_payload['id'];
  return typeof id === 'string' ? id : undefined;
}

export function verifySlack(input: SlackVerifyInput): { counts: PhaseCounts; violations: Violation[]; unknownNotes: string[]; failedNotes: string[] } {
  const { tracked, finals, messages } = input;
  const keyOwner = new Map<string, string>();
  for (const t of tracked) keyOwner.set(deliveryNonce(t.requestId), t.requestId);
  const byKey = new Map<string, SlackChannelMessage[]>();
  const byPermalink = new Map<string, SlackChannelMessage>();
  for (const m of messages) {
    byPermalink.set(permalink(input.workspaceUrlOf(m.channel), m.channel, m.ts), m);
    const key = keyOf(m);
    if (key !== undefined) byKey.set(key, [...(byKey.get(key) ?? []), m]);
  }

  const violations: Violation[] = [];
  const flagged = new Map<ViolationKind, Set<string>>();
  const describe = (m: SlackChannelMessage) => ({ channel: m.channel, ts: m.ts, user: m.user, key: keyOf(m), key_of: keyOwner.get(keyOf(m) ?? '') ?? 'no delivery', text: m.text.slice(0, 200) });
  const flag = (kind: ViolationKind, requestIds: string[], detail: string, shown: SlackChannelMessage[] = []) => {
    const set = flagged.get(kind) ?? new Set<string>();
    flagged.set(kind, set);
    for (const id of requestIds) set.add(id);
    const deliveries = requestIds.map((id) => {
      const t = tracked.find((x) => x.requestId === id);
      return {
        request_id: id,
        key: deliveryNonce(id),
        target: t?.payload['target'],
        content: t?.content,
        connector: t === undefined ? undefined : { accepted: t.accepted, posts: t.posts, failed_reposts: t.failedReposts, gave_up: t.gaveUp, vanished: t.vanished, timeline: t.timeline },
        final: finals.get(id),
        row: input.rows.get(id),
      };
    });
    const own = requestIds.flatMap((id) => byKey.get(deliveryNonce(id)) ?? []);
    violations.push({ kind, requestIds, detail, evidence: { deliveries, messages: [...new Set([...shown, ...own])].map(describe), herald_log: input.logsFor(requestIds) } });
  };

  const counts = zeroCounts({
    deliveries: tracked.length,
    posts: tracked.filter((t) => t.kind === 'post').length,
    dms: tracked.filter((t) => t.kind === 'dm').length,
    edits: tracked.filter((t) => t.kind === 'edit').length,
    messages: messages.length,
  });
  const stateOf = (id: string): StateJson | undefined => {
    const f = finals.get(id);
    return f?.status === 200 ? f.state : undefined;
  };

  const unknownNotes: string[] = [];
  const failedNotes: string[] = [];
  const urlOwners = new Map<string, string[]>();
  for (const t of tracked) {
    const f = finals.get(t.requestId);
    const state = stateOf(t.requestId);
    if (state === undefined) counts.states.missing += 1;
    else counts.states[state.state] += 1;
    if (t.vanished !== undefined) flag('lost', [t.requestId], `accepted, then forgotten by the bridge: ${t.vanished}`);
    if (t.regressed !== undefined) flag('lost', [t.requestId], `changed after delivery: ${t.regressed}`);
    if (f?.status === 404) {
      if (t.accepted) flag('lost', [t.requestId], 'accepted (202), but the bridge answers 404 unknown request_id at the end');
      else flag('stuck', [t.requestId], 'never acknowledged by the bridge, however often it was POSTed');
    } else if (f?.status === 'error') flag('stuck', [t.requestId], `no final state: ${f.detail}`);
    else if (state?.state === 'pending' || state?.state === 'unknown') {
      // Slack messages carry their key, so Herald can always decide from history: nothing may stay open.
      const row = input.rows.get(t.requestId);
      flag('stuck', [t.requestId], `still ${state.state} after settling (row: ${String(row?.['status'] ?? '-')}, reason ${JSON.stringify(row?.['reason'] ?? null)})`);
    }
    if (state?.state === 'failed' && t.kind === 'post' && t.destination === 'ops') counts.failedUnmapped += 1;
    else if (state?.state === 'failed') {
      // As in the other phases, not a violation by itself: Herald gave up after its attempts (each
      // hit a fault or a kill) and its connector took the failure as final. True only if no message
      // carries its key (failed-but-sent below); listed so each one can be read.
      const row = input.rows.get(t.requestId);
      failedNotes.push(`${t.requestId.slice(0, 12)}: failed ${state.code ?? ''} (${String(row?.['reason'] ?? 'no reason')}), ${t.failedReposts} re-POSTs after failed, then the connector gave up`);
    }
    // Unknown met along the way (an answer lost, Herald killed mid-send): how it ended.
    const unknownSeen = t.timeline.filter((line) => line.includes('→ unknown')).length;
    if (unknownSeen > 0) unknownNotes.push(`${t.requestId.slice(0, 12)}: unknown seen ${unknownSeen}×, re-POSTed ${t.unknownReposts}×, ended ${state?.state ?? 'without a state'}${state?.state === 'delivered' ? ` (${(byKey.get(deliveryNonce(t.requestId)) ?? []).length} message with its key)` : ''}`);

    const own = byKey.get(deliveryNonce(t.requestId)) ?? [];
    if (own.length > 1) {
      counts.extraMessages += own.length - 1;
      flag('duplicate', [t.requestId], `${own.length} messages carry this delivery's key`, own);
    }
    const expectedChannel = input.channelOf(t);
    for (const m of own) if (m.channel !== expectedChannel) flag('misattributed', [t.requestId], `its message ${m.ts} is in ${m.channel}, not ${expectedChannel ?? 'a mapped channel'}`, [m]);
    // Sent as its agent's identity: by that workspace's bot, never another's.
    const expectedBot = input.botOf(t);
    for (const m of own) if (m.user !== expectedBot) flag('misattributed', [t.requestId], `its message ${m.ts} is from ${m.user}, not its identity's bot ${expectedBot ?? '(none)'}`, [m]);
    if (state?.state === 'failed' && own.length > 0) flag('failed-but-sent', [t.requestId], `reported failed ${state.code ?? ''} but ${own.length} message(s) carry its key`, own);
    if (state?.state !== 'delivered') continue;
    const url = state.url ?? '';
    urlOwners.set(url, [...(urlOwners.get(url) ?? []), t.requestId]);
    const m = byPermalink.get(url);
    if (m === undefined) {
      flag('lost', [t.requestId], `delivered, but its url names no message in the sandbox (${url})`, own);
      continue;
    }
    if (keyOf(m) !== deliveryNonce(t.requestId)) {
      const owner = keyOwner.get(keyOf(m) ?? '');
      flag('misattributed', owner !== undefined ? [t.requestId, owner] : [t.requestId], `its url names message ${m.ts}, whose key belongs to ${owner ?? 'no delivery'}`, [m]);
    }
  }
  for (const [url, owners] of urlOwners) if (owners.length > 1) flag('misattributed', owners, `${owners.length} deliveries report the same message ${url}`);

  // Messages nothing accounts for (the sandbox's channels start empty in this phase).
  for (const m of messages) {
    const key = keyOf(m);
    if (key === undefined || !keyOwner.has(key)) {
      counts.orphans += 1;
      violations.push({ kind: 'orphan', requestIds: [], detail: `message ${m.ts} in ${m.channel} carries ${key === undefined ? 'no key' : `key ${key} of no delivery`}`, evidence: { messages: [describe(m)] } });
    }
  }

  counts.duplicates = flagged.get('duplicate')?.size ?? 0;
  counts.lost = flagged.get('lost')?.size ?? 0;
  counts.stuck = flagged.get('stuck')?.size ?? 0;
  counts.misattributed = flagged.get('misattributed')?.size ?? 0;
  counts.failedButSent = flagged.get('failed-but-sent')?.size ?? 0;
  return { counts, violations, unknownNotes, failedNotes };
}

/** Slack's permalink form: `<workspace url>archives/<channel>/p<ts without the dot>`. */
export function permalink(workspaceUrl: string, channel: string, ts: string): string {
  return `${workspaceUrl}archives/${channel}/p${ts.replace('.', '')}`;
}
