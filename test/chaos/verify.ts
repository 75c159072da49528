import { deliveryNonce } from '../../src/modules/deliveries/delivery.js';
import type { SandboxMessage } from '../../src/platforms/discord/sandbox/sandbox.js';
import type { DeletedMessage } from '../../src/platforms/discord/sandbox/state.js';
import { SANDBOX_IDS } from '../../src/platforms/discord/sandbox/sandbox.js';
import type { StateJson, Tracked } from './connector.js';

/**
 * The verdict of one phase: every Discord message the sandbox holds is tied to the delivery whose
 * nonce it carries (Herald derives the nonce from the request_id, so identical text never confuses
 * this), and every delivery's final state is checked against those messages.
 */

export type ViolationKind = 'duplicate' | 'lost' | 'stuck' | 'misattributed' | 'edit-order' | 'failed-but-sent' | 'orphan' | 'stale-write' | 'unknown-twin';

export interface Violation {
  kind: ViolationKind;
  requestIds: string[];
  detail: string;
  evidence?: unknown;
}

/** What the bridge answered at the end for a request_id (GET /mcp/deliveries/{id}). */
export type FinalState = { status: 200; state: StateJson } | { status: 404 } | { status: 'error'; detail: string };

/** A phase's counts before its verdict: what it sent and saw, every violation and state at zero. */
export function zeroCounts(sent: Pick<PhaseCounts, 'deliveries' | 'posts' | 'dms' | 'edits' | 'messages'>): PhaseCounts {
  return {
    ...sent,
    duplicates: 0,
    extraMessages: 0,
    lost: 0,
    stuck: 0,
    misattributed: 0,
    editOrder: 0,
    failedButSent: 0,
    orphans: 0,
    undecided: 0,
    staleWrites: 0,
    unknownTwins: 0,
    states: { delivered: 0, failed: 0, unknown: 0, pending: 0, missing: 0 },
    failedUnmapped: 0,
    appliedEdits: 0,
    unappliedEdits: 0,
    reactions: 0,
    reactionsShown: 0,
    files: 0,
    filesShown: 0,
    filesDeleted: 0,
    deletes: 0,
    deletesDone: 0,
  };
}

export interface PhaseCounts {
  deliveries: number;
  posts: number;
  dms: number;
  edits: number;
  messages: number;
  /** Deliveries with more than one message, and how many messages too many. */
  duplicates: number;
  extraMessages: number;
  lost: number;
  stuck: number;
  misattributed: number;
  editOrder: number;
  failedButSent: number;
  /** Messages no delivery's nonce accounts for. */
  orphans: number;
  /**
   * Not a violation: deliveries Herald deliberately left `unknown` because twins (identical
   * content, same channel) were in doubt together and their messages cannot be told apart without
   * the nonces (docs/guides/how-it-works.md, "In doubt", step 2), confirmed genuine by the verifier (see `undecided`).
   */
  undecided: number;
  states: { delivered: number; failed: number; unknown: number; pending: number; missing: number };
  /**
   * Deliveries whose state or url changed after they were first seen `delivered` (by a connector's
   * polls during the run, or at the end): a write that landed after the outcome was committed.
   */
  staleWrites?: number;
  /**
   * Deliveries of a shared group (the same content to the same channel under several request_ids)
   * that end `unknown`: twins in doubt together, which Herald must never let be in flight at once.
   * A violation, whether or not the verifier could confirm the ambiguity (see `undecided`).
   */
  unknownTwins?: number;
  /** Deliveries failed for a reason the campaign causes on purpose (posts to an unmapped destination). */
  failedUnmapped: number;
  appliedEdits: number;
  unappliedEdits: number;
  /** Reaction requests, and the ones the sandbox shows (exactly once each). */
  reactions?: number;
  reactionsShown?: number;
  /**
   * Posts and DMs with files, the ones whose one message carries exactly their attachments, and the
   * ones deleted on purpose before the check (their message is gone with its files).
   */
  files?: number;
  filesShown?: number;
  filesDeleted?: number;
  /** Delete requests, and the ones whose message is gone, deleted exactly once by Herald. */
  deletes?: number;
  deletesDone?: number;
}

/** The reason Herald keeps on the row when it will not guess between twins in doubt. */
export const TWINS_UNDECIDED_REASON = 'another unresolved delivery with the same content may own the matching message';

/** One delivery counted as undecided rather than stuck, with what made the ambiguity genuine. */
export interface Undecided {
  requestId: string;
  channel: string;
  /** Every delivery with the same body to the same channel, and its final state. */
  group: { requestId: string; state: string }[];
  /** The unresolved (unknown/pending) members: at least two, this one among them. */
  unresolved: string[];
  /** Messages in the channel with that body that no delivered member's url names, and whose nonce they carry. */
  unattributed: { id: string; nonceOf: string }[];
  /** One line for the report. */
  line: string;
}

export interface VerifyInput {
  tracked: Tracked[];
  finals: Map<string, FinalState>;
  messages: SandboxMessage[];
  /** Messages deleted, as the sandbox recorded them (the phases without deletes may leave it out). */
  deleted?: readonly DeletedMessage[];
  /** destination → channel id, as mapped for the phase. */
  channels: Record<string, string>;
  /** The DM channel(s) of the user the DMs go to. */
  dmChannels: string[];
  rows: Map<string, Record<string, unknown>>;
  /** Rows seen changed after they were first seen delivered (test/chaos/stale-watch.ts): request_id → what changed. */
  staleRows?: ReadonlyMap<string, string>;
  /** Herald's log lines that mention any of these request_ids. */
  logsFor(requestIds: string[]): string[];
  /**
   * The gateway holder's story between these times (ms since the epoch): connects, kills, nonce
   * reports it could not record. Whether the gateway saw a message decides whether twins in doubt
   * can be told apart, so every violation shows it.
   */
  gatewayLog?(fromMs: number, untilMs: number): string[];
  /** The bot a delivery must be sent as (its agent's identity's), by user id; undefined: not checked. */
  authorOf?(t: Tracked): string | undefined;
}

export function violationTotal(c: PhaseCounts): number {
  return c.duplicates + c.lost + c.stuck + c.misattributed + c.editOrder + c.failedButSent + c.orphans + (c.staleWrites ?? 0) + (c.unknownTwins ?? 0);
}

export function verify(input: VerifyInput): { counts: PhaseCounts; violations: Violation[]; undecided: Undecided[] } {
  const { tracked, finals, messages } = input;
  const byId = new Map(tracked.map((t) => [t.requestId, t]));
  const nonceOwner = new Map<string, string>();
  for (const t of tracked) if (t.kind === 'post' || t.kind === 'dm') nonceOwner.set(deliveryNonce(t.requestId), t.requestId);
  const byNonce = new Map<string, SandboxMessage[]>();
  const byMessage = new Map<string, SandboxMessage>();
  for (const m of messages) {
    byMessage.set(`${m.channel_id}/${m.id}`, m);
    if (m.nonce !== undefined) byNonce.set(String(m.nonce), [...(byNonce.get(String(m.nonce)) ?? []), m]);
  }
  const dmChannels = new Set(input.dmChannels);
  const deletedIds = new Set((input.deleted ?? []).map((d) => `${d.channel_id}/${d.id}`));

  const violations: Violation[] = [];
  const flagged = new Map<ViolationKind, Set<string>>();
  const flag = (kind: ViolationKind, requestIds: string[], detail: string, messagesToShow: SandboxMessage[] = []) => {
    const set = flagged.get(kind) ?? new Set<string>();
    flagged.set(kind, set);
    for (const id of requestIds) set.add(id);
    violations.push({ kind, requestIds, detail, evidence: evidence(requestIds, messagesToShow) });
  };

  const describeMessage = (m: SandboxMessage) => ({
    id: m.id,
    channel_id: m.channel_id,
    nonce: m.nonce,
    nonce_of: m.nonce !== undefined ? (nonceOwner.get(String(m.nonce)) ?? 'no delivery') : 'no nonce',
    content: m.content,
    embeds: m.embeds.length,
    created: m.timestamp,
    edits: m.edits,
    edited: m.edited_timestamp,
  });
  const evidence = (requestIds: string[], extra: SandboxMessage[]) => {
    const shown = new Map<string, SandboxMessage>();
    for (const m of extra) shown.set(m.id, m);
    return {
      deliveries: requestIds.map((id) => {
        const t = byId.get(id);
        for (const m of byNonce.get(deliveryNonce(id)) ?? []) shown.set(m.id, m);
        return {
          request_id: id,
          nonce: t?.kind === 'edit' ? undefined : deliveryNonce(id),
          kind: t?.kind,
          target: t?.payload['target'],
          content: t?.content,
          group: t?.group,
          connector: t === undefined ? undefined : { accepted: t.accepted, posts: t.posts, failed_reposts: t.failedReposts, gave_up: t.gaveUp, vanished: t.vanished, timeline: t.timeline },
          final: finals.get(id),
          row: input.rows.get(id),
        };
      }),
      messages: [...shown.values()].map(describeMessage),
      herald_log: input.logsFor(requestIds),
      gateway_log: gatewayAround(requestIds, [...shown.values()]),
    };
  };

  /** The gateway's lines from 30 s before these deliveries were created to 30 s after their last doubt or message. */
  const gatewayAround = (requestIds: string[], shownMessages: SandboxMessage[]): string[] | undefined => {
    if (input.gatewayLog === undefined) return undefined;
    const times: number[] = [];
    for (const id of requestIds) {
      const row = input.rows.get(id);
      for (const key of ['created_at', 'doubt_from', 'doubt_until']) {
        const v = row?.[key];
        if (typeof v === 'string') times.push(Date.parse(v));
      }
    }
    for (const m of shownMessages) times.push(Date.parse(m.timestamp));
    const known = times.filter((t) => Number.isFinite(t));
    if (known.length === 0) return undefined;
    return input.gatewayLog(Math.min(...known) - 30_000, Math.max(...known) + 30_000);
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

  const undecided = findUndecided(input, stateOf, nonceOwner);

  // States, stuck, vanished records.
  for (const t of tracked) {
    const f = finals.get(t.requestId);
    const state = stateOf(t.requestId);
    if (state === undefined) counts.states.missing += 1;
    else counts.states[state.state] += 1;
    if (t.vanished !== undefined) flag('lost', [t.requestId], `accepted, then forgotten by the bridge: ${t.vanished}`);
    // Stale writes: once seen delivered, a delivery's state and url never change again.
    if (t.regressed !== undefined) flag('stale-write', [t.requestId], `changed after delivery: ${t.regressed}`);
    if (t.deliveredUrl !== undefined && state !== undefined && (state.state !== 'delivered' || state.url !== t.deliveredUrl) && t.regressed === undefined) {
      flag('stale-write', [t.requestId], `reported delivered at ${t.deliveredUrl} during the run, ${state.state} ${state.url ?? ''} at the end`);
    }
    const staleRow = input.staleRows?.get(t.requestId);
    if (staleRow !== undefined) flag('stale-write', [t.requestId], `changed after delivery in the store: ${staleRow}`);
    // Unknown twins: a shared group's member (same content, same channel) never ends unknown.
    if (t.group !== undefined && state?.state === 'unknown') {
      const twins = tracked.filter((x) => x.group === t.group).map((x) => `${x.requestId.slice(0, 12)} ${stateOf(x.requestId)?.state ?? 'no state'}`);
      flag('unknown-twin', [t.requestId], `shared group ${t.group} (${twins.join(', ')}): this one ended unknown`);
    }
    if (f?.status === 404) {
      if (t.accepted) flag('lost', [t.requestId], 'accepted (202), but the bridge answers 404 unknown request_id at the end');
      else flag('stuck', [t.requestId], 'never acknowledged by the bridge, however often it was POSTed');
    } else if (f?.status === 'error') flag('stuck', [t.requestId], `no final state: ${f.detail}`);
    else if (state !== undefined && (state.state === 'pending' || state.state === 'unknown') && !undecided.has(t.requestId)) flag('stuck', [t.requestId], `still ${state.state} after settling`);
    if (state?.state === 'failed' && t.kind === 'post' && t.destination === 'ops') counts.failedUnmapped += 1;
  }

  // Posts and DMs: their messages, found by nonce.
  const urlOwners = new Map<string, string[]>();
  for (const t of tracked) {
    if (t.kind !== 'post' && t.kind !== 'dm') continue;
    const nonce = deliveryNonce(t.requestId);
    const own = byNonce.get(nonce) ?? [];
    const state = stateOf(t.requestId);
    if (own.length > 1) {
      counts.extraMessages += own.length - 1;
      flag('duplicate', [t.requestId], `${own.length} messages carry this delivery's nonce`, own);
    }
    const expectedChannel = t.kind === 'post' ? input.channels[t.destination ?? ''] : undefined;
    for (const m of own) {
      const wrongPlace = t.kind === 'post' ? m.channel_id !== expectedChannel : !dmChannels.has(m.channel_id);
      if (wrongPlace) flag('misattributed', [t.requestId], `its message ${m.id} is in channel ${m.channel_id}, not the target's`, [m]);
      const author = input.authorOf?.(t);
      if (author !== undefined && m.author.id !== author) flag('misattributed', [t.requestId], `its message ${m.id} was sent as bot ${m.author.id}, not as its agent's ${author}`, [m]);
    }
    if (state?.state === 'failed' && own.length > 0) flag('failed-but-sent', [t.requestId], `reported failed ${state.code ?? ''} but ${own.length} message(s) carry its nonce`.replace('  ', ' '), own);
    if (state?.state !== 'delivered') continue;
    const url = parseUrl(state.url);
    if (url === undefined) {
      flag('lost', [t.requestId], `delivered with an unreadable url ${JSON.stringify(state.url)}`);
      continue;
    }
    urlOwners.set(state.url ?? '', [...(urlOwners.get(state.url ?? '') ?? []), t.requestId]);
    // A post's url names the guild its target names (the sandbox's, or a guild of another identity's).
    const targetGuild = (t.payload['target'] as { guild_id?: unknown } | undefined)?.guild_id;
    const scopeOk = t.kind === 'post' ? url.scope === (typeof targetGuild === 'string' ? targetGuild : SANDBOX_IDS.guild) : url.scope === '@me';
    if (!scopeOk) flag('misattributed', [t.requestId], `url scope ${url.scope} does not fit a ${t.kind}`);
    const m = byMessage.get(`${url.channel}/${url.message}`);
    if (m === undefined && deletedIds.has(`${url.channel}/${url.message}`)) {
      // Deleted: whether a delete asked for it, and only once, is verifyDeletes' to say.
      if (t.attachments !== undefined) counts.filesDeleted = (counts.filesDeleted ?? 0) + 1;
      // Its url's message is gone: any message still carrying its nonce is a second one.
      if (own.length === 1) flag('duplicate', [t.requestId], `its message ${url.message} was deleted, but ${own.length} other message(s) carry its nonce`, own);
      continue;
    }
    if (m === undefined) {
      flag('lost', [t.requestId], `delivered, but its url names no message (${state.url})`, own);
      continue;
    }
    if (t.attachments !== undefined) {
      const expected = t.attachments.map((a) => `${a.filename} ${a.size}`);
      const shown = (m.attachments ?? []).map((a) => `${a.filename} ${a.size}`);
      if (JSON.stringify(shown) === JSON.stringify(expected)) counts.filesShown = (counts.filesShown ?? 0) + 1;
      else flag('lost', [t.requestId], `its message carries [${shown.join(', ')}], not its files [${expected.join(', ')}]`, [m]);
    }
    if (String(m.nonce) !== nonce) {
      const owner = m.nonce !== undefined ? nonceOwner.get(String(m.nonce)) : undefined;
      flag('misattributed', owner !== undefined ? [t.requestId, owner] : [t.requestId], `its url names message ${m.id}, whose nonce belongs to ${owner ?? `no delivery (${String(m.nonce)})`}`, [m, ...own]);
    }
    if (own.length === 0) flag('lost', [t.requestId], 'delivered, but no message carries its nonce', [m]);
  }
  for (const [url, owners] of urlOwners) {
    if (owners.length > 1) flag('misattributed', owners, `${owners.length} deliveries report the same message ${url}`);
  }

  // Messages nothing accounts for.
  for (const m of messages) {
    if (m.nonce === undefined || !nonceOwner.has(String(m.nonce))) {
      counts.orphans += 1;
      violations.push({ kind: 'orphan', requestIds: [], detail: `message ${m.id} in ${m.channel_id} carries ${m.nonce === undefined ? 'no nonce' : `nonce ${String(m.nonce)} of no delivery`}`, evidence: { messages: [describeMessage(m)] } });
    }
  }

  // Edits: each original's final content is its highest-seq applied edit.
  for (const original of tracked) {
    if (original.kind === 'edit' || original.edits.length === 0) continue;
    const edits = original.edits.flatMap((id) => {
      const t = byId.get(id);
      return t === undefined ? [] : [{ t, state: stateOf(id) }];
    });
    const originalState = stateOf(original.requestId);
    const own = byNonce.get(deliveryNonce(original.requestId)) ?? [];
    const url = parseUrl(originalState?.url);
    const message = url !== undefined ? byMessage.get(`${url.channel}/${url.message}`) : own[0];
    const applied = edits.filter((e) => e.state?.state === 'delivered' && e.state.applied === true);
    const unapplied = edits.filter((e) => e.state?.state === 'delivered' && e.state.applied === false);
    counts.appliedEdits += applied.length;
    counts.unappliedEdits += unapplied.length;
    const ids = [original.requestId, ...original.edits];
    for (const e of edits) {
      if (e.state?.state === 'delivered' && e.state.url !== originalState?.url) {
        flag('misattributed', [e.t.requestId, original.requestId], `edit reports url ${e.state.url ?? ''}, its original ${originalState?.url ?? 'none'}`);
      }
    }
    const top = applied.reduce<(typeof applied)[number] | undefined>((best, e) => ((e.t.seq ?? 0) > (best?.t.seq ?? 0) ? e : best), undefined);
    for (const e of unapplied) {
      if ((e.t.seq ?? 0) > (top?.t.seq ?? 0)) flag('edit-order', ids, `seq ${e.t.seq} reported applied:false, but the highest applied seq is ${top?.t.seq ?? 'none'}`, message ? [message] : []);
    }
    if (message === undefined) continue;
    if (message.edits < applied.length) flag('edit-order', ids, `${applied.length} edits reported applied, but Discord saw ${message.edits} PATCHes`, [message]);
    const expected = top?.t.content ?? original.content;
    if (message.content === expected) continue;
    const source = edits.find((e) => e.t.content === message.content);
    if (source !== undefined && source.state?.state === 'failed') {
      flag('failed-but-sent', [source.t.requestId, original.requestId], `edit seq ${source.t.seq} reported failed ${source.state.code ?? ''}, but the message shows its content`, [message]);
    } else if (source !== undefined && (top === undefined || (source.t.seq ?? 0) > (top.t.seq ?? 0)) && source.state?.state !== 'delivered') {
      // Applied by Discord, not settled yet: already counted as stuck.
      flag('stuck', [source.t.requestId], `edit seq ${source.t.seq} shows on Discord but is still ${source.state?.state ?? 'unanswered'}`, [message]);
    } else {
      flag('edit-order', ids, `final content is ${source !== undefined ? `seq ${source.t.seq}'s (${source.state?.state ?? '?'}${source.state?.applied === false ? ', applied:false' : ''})` : JSON.stringify(message.content)}, expected ${top !== undefined ? `seq ${top.t.seq}'s` : "the original's"}`, [message]);
    }
  }

  for (const t of tracked) if (t.attachments !== undefined) counts.files = (counts.files ?? 0) + 1;
  verifyReactions(tracked, stateOf, messages, deletedIds, flag, counts);
  verifyDeletes(tracked, stateOf, messages, input.deleted ?? [], flag, counts);

  counts.duplicates = flagged.get('duplicate')?.size ?? 0;
  counts.lost = flagged.get('lost')?.size ?? 0;
  counts.stuck = flagged.get('stuck')?.size ?? 0;
  counts.misattributed = flagged.get('misattributed')?.size ?? 0;
  counts.editOrder = violations.filter((v) => v.kind === 'edit-order').length;
  counts.failedButSent = flagged.get('failed-but-sent')?.size ?? 0;
  counts.undecided = undecided.size;
  counts.staleWrites = flagged.get('stale-write')?.size ?? 0;
  counts.unknownTwins = flagged.get('unknown-twin')?.size ?? 0;
  return { counts, violations, undecided: [...undecided.values()] };
}

/**
 * The deliveries Herald rightly left `unknown` between twins in doubt (docs/guides/how-it-works.md, "In doubt", step 2).
 * Counted so only when the verifier confirms the ambiguity from what is left, all of:
 * - the bridge answers `unknown`, and the row is `unknown` with exactly Herald's twins reason;
 * - at least two deliveries with this very body (content, card, links) to this same channel are
 *   unresolved (unknown or pending) at the end, this one among them;
 * - the channel holds at least one message with that body that no delivered member's url names:
 *   a message that may be this delivery's or a twin's, which content and time alone cannot tell.
 * Which unresolved member's nonce that message carries does not matter: that is exactly what Herald
 * could not see without the gateway. Anything short of this stays `stuck`, a violation.
 */
function findUndecided(input: VerifyInput, stateOf: (id: string) => StateJson | undefined, nonceOwner: Map<string, string>): Map<string, Undecided> {
  const dmChannels = new Set(input.dmChannels);
  const channelOf = (t: Tracked): string | undefined => (t.kind === 'post' ? input.channels[t.destination ?? ''] : t.kind === 'dm' ? 'dm' : undefined);
  const messageChannel = (m: SandboxMessage): string => (dmChannels.has(m.channel_id) ? 'dm' : m.channel_id);
  const bodyOf = (t: Tracked): string => stableJson(t.payload['body']);
  const byId = new Map(input.tracked.map((t) => [t.requestId, t]));
  const groups = new Map<string, Tracked[]>();
  for (const t of input.tracked) {
    const channel = channelOf(t);
    if (channel === undefined) continue;
    const key = `${channel}\u0000${bodyOf(t)}`;
    groups.set(key, [...(groups.get(key) ?? []), t]);
  }
  const out = new Map<string, Undecided>();
  for (const [key, members] of groups) {
    if (members.length < 2) continue;
    const channel = key.slice(0, key.indexOf('\u0000'));
    const body = bodyOf(members[0] as Tracked);
    const content = (members[0] as Tracked).content;
    const unresolved = members.filter((t) => {
      const s = stateOf(t.requestId)?.state;
      return s === 'unknown' || s === 'pending';
    });
    if (unresolved.length < 2) continue;
    // Urls the delivered members report: those messages are attributed.
    const attributed = new Set<string>();
    for (const t of members) {
      const s = stateOf(t.requestId);
      const url = s?.state === 'delivered' ? parseUrl(s.url) : undefined;
      if (url !== undefined) attributed.add(`${url.channel}/${url.message}`);
    }
    // A message with this body: one whose nonce belongs to a delivery with this body, or (no known
    // nonce) one showing this text; in this channel, and named by no delivered member.
    const unattributed = input.messages.filter((m) => {
      if (messageChannel(m) !== channel || attributed.has(`${m.channel_id}/${m.id}`)) return false;
      const owner = m.nonce !== undefined ? byId.get(nonceOwner.get(String(m.nonce)) ?? '') : undefined;
      return owner !== undefined ? bodyOf(owner) === body && channelOf(owner) === channel : m.content === content;
    });
    if (unattributed.length === 0) continue;
    for (const t of unresolved) {
      const row = input.rows.get(t.requestId);
      if (stateOf(t.requestId)?.state !== 'unknown' || row?.['status'] !== 'unknown' || row['reason'] !== TWINS_UNDECIDED_REASON) continue;
      const u: Omit<Undecided, 'line'> = {
        requestId: t.requestId,
        channel,
        group: members.map((x) => ({ requestId: x.requestId, state: stateOf(x.requestId)?.state ?? 'no state' })),
        unresolved: unresolved.map((x) => x.requestId),
        unattributed: unattributed.map((m) => ({ id: m.id, nonceOf: m.nonce !== undefined ? (nonceOwner.get(String(m.nonce)) ?? 'no delivery') : 'no nonce' })),
      };
      const short = (id: string) => id.slice(0, 12);
      const line =
        `${short(t.requestId)} in ${channel}: ${members.length} deliveries with this body (${u.group.map((g) => `${short(g.requestId)} ${g.state}`).join(', ')}); ` +
        `${unresolved.length} unresolved; ${unattributed.length} unattributed message(s) with this body (${u.unattributed.map((m) => `${m.id} nonce-of ${m.nonceOf === t.requestId ? 'this one' : short(m.nonceOf)}`).join(', ')}); ` +
        `doubt ${String(row['doubt_from'] ?? '-')}..${String(row['doubt_until'] ?? '-')}`;
      out.set(t.requestId, { ...u, line });
    }
  }
  return out;
}

/** JSON with object keys sorted, so two equal bodies compare equal whatever their key order. */
function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'undefined';
}

function parseUrl(url: string | undefined): { scope: string; channel: string; message: string } | undefined {
  const m = /^https:\/\/discord\.com\/channels\/([0-9]+|@me)\/([0-9]+)\/([0-9]+)$/.exec(url ?? '');
  if (m === null) return undefined;
  return { scope: m[1] ?? '', channel: m[2] ?? '', message: m[3] ?? '' };
}

/**
 * Reactions (the default-window phase): each request reacts with its own emoji on its original, so
 * the sandbox's truth must show, for each delivered one, that emoji on that message by Herald alone
 * exactly once; for a failed one, not at all.
 */
function verifyReactions(
  tracked: Tracked[],
  stateOf: (id: string) => StateJson | undefined,
  messages: SandboxMessage[],
  deletedIds: ReadonlySet<string>,
  flag: (kind: ViolationKind, requestIds: string[], detail: string, messagesToShow?: SandboxMessage[]) => void,
  counts: PhaseCounts,
): void {
  const byId = new Map(messages.map((m) => [m.id, m]));
  for (const t of tracked) {
    if (t.kind !== 'reaction' || t.original === undefined) continue;
    counts.reactions = (counts.reactions ?? 0) + 1;
    const state = stateOf(t.requestId);
    const url = parseUrl(stateOf(t.original)?.url);
    const messageId = url?.message;
    const message = messageId === undefined ? undefined : byId.get(messageId);
    // Its message was deleted on purpose: the reaction went with it, or failed NOT_FOUND; both are right.
    if (message === undefined && url !== undefined && deletedIds.has(`${url.channel}/${url.message}`)) continue;
    if (message === undefined) {
      if (state?.state === 'delivered') flag('lost', [t.requestId, t.original], 'reaction reported delivered, but its message is not in the sandbox');
      continue;
    }
    const found = (message.reactions ?? []).filter((r) => r.emoji === t.emoji);
    const by = found.flatMap((r) => r.users);
    if (found.length > 1 || by.length > 1) flag('duplicate', [t.requestId], `${t.emoji ?? ''} shows ${found.length} time(s) by ${by.length} user(s)`, [message]);
    if (state?.state === 'delivered' && by.length === 0) flag('lost', [t.requestId], `reaction ${t.emoji ?? ''} reported delivered, but the message does not show it`, [message]);
    if (state?.state === 'failed' && by.length > 0) flag('failed-but-sent', [t.requestId], `reaction ${t.emoji ?? ''} reported failed, but the message shows it`, [message]);
    if (by.length === 1) counts.reactionsShown = (counts.reactionsShown ?? 0) + 1;
  }
}

/**
 * Deletes (the default-window phase): each delete request names one delivered post or DM of its
 * connector's. A delivered delete leaves that message gone, recorded deleted exactly once, by the
 * bot that wrote it; a failed one leaves it there. A message may be gone only if a delete asked for
 * it, and a deleted message never shows again (an edit racing the delete must not bring it back).
 */
function verifyDeletes(
  tracked: Tracked[],
  stateOf: (id: string) => StateJson | undefined,
  messages: SandboxMessage[],
  deleted: readonly DeletedMessage[],
  flag: (kind: ViolationKind, requestIds: string[], detail: string, messagesToShow?: SandboxMessage[]) => void,
  counts: PhaseCounts,
): void {
  const live = new Map(messages.map((m) => [`${m.channel_id}/${m.id}`, m]));
  const deletions = new Map<string, DeletedMessage[]>();
  for (const d of deleted) deletions.set(`${d.channel_id}/${d.id}`, [...(deletions.get(`${d.channel_id}/${d.id}`) ?? []), d]);
  const asked = new Set<string>();
  for (const t of tracked) {
    if (t.kind !== 'delete' || t.original === undefined) continue;
    counts.deletes = (counts.deletes ?? 0) + 1;
    const state = stateOf(t.requestId);
    const url = parseUrl(stateOf(t.original)?.url);
    if (url === undefined) continue;
    const key = `${url.channel}/${url.message}`;
    asked.add(key);
    const records = deletions.get(key) ?? [];
    const message = live.get(key);
    const ids = [t.requestId, t.original];
    if (records.length > 1) flag('duplicate', ids, `message ${url.message} recorded deleted ${records.length} times`);
    if (records.length > 0 && message !== undefined) flag('duplicate', ids, `message ${url.message} was deleted, yet shows again`, [message]);
    for (const r of records) if (r.deleted_by !== r.author_id) flag('misattributed', ids, `message ${url.message} deleted by ${r.deleted_by}, not its author ${r.author_id}`);
    if (state?.state === 'delivered') {
      if (records.length === 0) flag('lost', ids, `delete reported delivered, but message ${url.message} ${message !== undefined ? 'is still there' : 'was never recorded deleted'}`, message !== undefined ? [message] : []);
      else if (records.length === 1 && message === undefined) counts.deletesDone = (counts.deletesDone ?? 0) + 1;
    }
    if (state?.state === 'failed' && records.length > 0) flag('failed-but-sent', ids, `delete reported failed ${state.code ?? ''}, but message ${url.message} was deleted`.replace('  ', ' '));
  }
  const owner = new Map<string, string>();
  for (const t of tracked) {
    const url = t.kind === 'post' || t.kind === 'dm' ? parseUrl(stateOf(t.requestId)?.url) : undefined;
    if (url !== undefined) owner.set(`${url.channel}/${url.message}`, t.requestId);
  }
  for (const [key, records] of deletions) {
    if (asked.has(key)) continue;
    const who = owner.get(key);
    flag('lost', who !== undefined ? [who] : [], `message ${key} was deleted (${records.length} time(s), by ${records.map((r) => r.deleted_by).join(', ')}) though no delete asked for it`);
  }
}
