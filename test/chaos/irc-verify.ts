import { Client, type IrcLine } from 'irc-framework';
import type { ChatConnectorStats, ChatStateJson, TrackedChat } from './irc-connector.js';
import type { PhaseCounts, Violation, ViolationKind } from './verify.js';

/**
 * The verdict of the IRC chat phase, from an observer of the phase's own: a plain irc-framework
 * client (not Herald's connection code) joined to every channel, recording every PRIVMSG with its
 * sender's nick, its msgid and its `+herald/delivery` tag, live or replayed by the server's channel
 * history on JOIN. It reconnects and rejoins after the server is killed. Every send is then checked
 * against what it saw and against Herald's final answer for it.
 */

/** One PRIVMSG the observer read. */
export interface SeenLine {
  /** The observer's connection it came on (a new one after every reconnect). */
  conn: number;
  channel: string;
  nick: string;
  text: string;
  msgid: string | undefined;
  /** `+herald/delivery`: the send's key, or `key:i/n` for part i of n. */
  tag: string | undefined;
  /** Replayed by the server's history on JOIN (a line the observer may have read live too). */
  replayed: boolean;
  /** ms since the phase began. */
  at: number;
}

/** One NAMES answer: Herald's observers (nick herald, herald_, …) in a channel at one time. */
export interface NamesSample {
  at: number;
  channel: string;
  heralds: string[];
}

interface Conn {
  id: number;
  /** The server's boot time, read from the msgids it sends (`<sid>~<boot>~<counter>`). */
  boot: string | undefined;
  /** The highest msgid counter read on it. */
  maxCounter: number;
  /** Channels joined on it (our own JOIN came back), and how many lines the server replayed into each. */
  joined: Map<string, { at: number; replayed: number }>;
  registeredAt: number;
  closedAt: number | undefined;
}

/** InspIRCd's channel history replays at most this many lines on JOIN (test/irc/inspircd.conf). */
const HISTORY_MAX_LINES = 50;
const HERALD_NICK = /^herald_*$/i;

export function parseMsgid(msgid: string | undefined): { boot: string; counter: number } | undefined {
  const m = /^[0-9A-Z]{3}~([0-9]+)~([0-9]+)$/.exec(msgid ?? '');
  return m === null ? undefined : { boot: m[1] ?? '', counter: Number(m[2]) };
}

/**
 * The phase's own IRC client: joins `channels`, records every PRIVMSG, asks NAMES every second,
 * and reconnects (a new connection) whenever its link drops.
 */
export class IrcWatcher {
  readonly lines: SeenLine[] = [];
  readonly names: NamesSample[] = [];
  readonly conns: Conn[] = [];
  private client: Client | undefined;
  private current: Conn | undefined;
  private stopped = false;
  private retry: NodeJS.Timeout | undefined;
  private namesTimer: NodeJS.Timeout | undefined;
  private readonly namesBuffer = new Map<string, string[]>();
  private readonly batches = new Map<string, string>();

  constructor(
    private readonly port: number,
    private readonly nick: string,
    private readonly channels: readonly string[],
    private readonly t0: number,
  ) {}

  private now(): number {
    return Date.now() - this.t0;
  }

  /** Connected and in every channel now. */
  get present(): boolean {
    return this.current !== undefined && this.channels.every((c) => this.current?.joined.has(c) === true);
  }

  start(): void {
    this.stopped = false;
    this.open();
    this.namesTimer = setInterval(() => {
      const c = this.client;
      if (c === undefined || this.current === undefined) return;
      for (const ch of this.current.joined.keys()) c.raw('NAMES', ch);
    }, 1_000);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retry);
    clearInterval(this.namesTimer);
    this.drop();
  }

  private drop(): void {
    const c = this.client;
    this.client = undefined;
    if (this.current !== undefined) this.current.closedAt = this.now();
    this.current = undefined;
    if (c !== undefined) {
      c.removeAllListeners();
      c.on('error', () => undefined);
      try {
        c.connection.end();
      } catch {
        // already gone
      }
    }
  }

  private open(): void {
    if (this.stopped) return;
    const client = new Client();
    this.client = client;
    client.requestCap(['message-tags', 'server-time', 'batch']);
    let conn: Conn | undefined;
    client.use((_c, raw) =>
      raw.use((command, line, _raw, _cl, next) => {
        try {
          if (conn !== undefined && this.client === client) this.read(conn, command, line);
        } finally {
          next();
        }
      }),
    );
    const again = () => {
      if (this.client !== client) return;
      this.drop();
      this.retry = setTimeout(() => this.open(), 200);
    };
    // Not registered in time (the server is down or starting): a fresh connection.
    const timer = setTimeout(again, 3_000);
    client.on('registered', () => {
      clearTimeout(timer);
      conn = { id: this.conns.length + 1, boot: undefined, maxCounter: -1, joined: new Map(), registeredAt: this.now(), closedAt: undefined };
      this.conns.push(conn);
      this.current = conn;
      for (const ch of this.channels) client.raw('JOIN', ch);
    });
    client.on('close', () => (clearTimeout(timer), again()));
    client.on('socket close', () => (clearTimeout(timer), again()));
    client.on('error', () => undefined);
    client.connect({ host: '127.0.0.1', port: this.port, nick: this.nick, username: 'watcher', gecos: 'chaos observer', auto_reconnect: false, version: null, enable_echomessage: false, message_max_length: 100_000 });
  }

  private read(conn: Conn, command: string, line: IrcLine): void {
    if (command === 'BATCH') {
      const [ref = '', type, target] = line.params;
      if (ref.startsWith('+') && type === 'chathistory' && target !== undefined) this.batches.set(ref.slice(1), target.toLowerCase());
      else if (ref.startsWith('-')) this.batches.delete(ref.slice(1));
      return;
    }
    if (command === 'JOIN' && line.nick.toLowerCase() === this.nick.toLowerCase()) {
      const ch = (line.params[0] ?? '').toLowerCase();
      conn.joined.set(ch, { at: this.now(), replayed: 0 });
      return;
    }
    if (command === 'RPL_NAMEREPLY' || command === '353') {
      const ch = (line.params[2] ?? '').toLowerCase();
      const nicks = (line.params[3] ?? '').split(' ').filter((n) => n !== '').map((n) => n.replace(/^[@+%~&]+/, '').replace(/!.*$/, ''));
      this.namesBuffer.set(ch, [...(this.namesBuffer.get(ch) ?? []), ...nicks]);
      return;
    }
    if (command === 'RPL_ENDOFNAMES' || command === '366') {
      const ch = (line.params[1] ?? '').toLowerCase();
      const nicks = this.namesBuffer.get(ch) ?? [];
      this.namesBuffer.delete(ch);
      this.names.push({ at: this.now(), channel: ch, heralds: nicks.filter((n) => HERALD_NICK.test(n)) });
      return;
    }
    if (command !== 'PRIVMSG') return;
    const [target, text] = line.params;
    if (target === undefined || text === undefined || !/^[#&]/.test(target)) return;
    const msgid = typeof line.tags['msgid'] === 'string' ? line.tags['msgid'] : undefined;
    const tag = line.tags['+herald/delivery'];
    const batch = line.tags['batch'];
    const replayed = typeof batch === 'string' && this.batches.has(batch);
    const channel = target.toLowerCase();
    if (replayed) {
      const j = conn.joined.get(channel);
      if (j !== undefined) j.replayed += 1;
    }
    const parsed = parseMsgid(msgid);
    if (parsed !== undefined) {
      conn.boot ??= parsed.boot;
      if (parsed.boot === conn.boot) conn.maxCounter = Math.max(conn.maxCounter, parsed.counter);
    }
    this.lines.push({ conn: conn.id, channel, nick: line.nick, text, msgid, tag: typeof tag === 'string' ? tag : undefined, replayed, at: this.now() });
  }

  /**
   * Whether the observer must have read the line with this msgid, had it gone to `channel`: a
   * connection to the same server run (boot time) was in the channel, with the server's history
   * replay of it complete, and read a line at least as late (the counter is the server's, in order).
   */
  mustHaveSeen(channel: string, msgid: string | undefined): boolean {
    const m = parseMsgid(msgid);
    if (m === undefined) return false;
    return this.conns.some((c) => {
      const j = c.joined.get(channel);
      return c.boot === m.boot && c.maxCounter >= m.counter && j !== undefined && j.replayed < HISTORY_MAX_LINES;
    });
  }
}

/** The key of a line's tag and its part: `key` (0 of 1) or `key:i/n`. */
export function parseTag(tag: string): { key: string; index: number; count: number } | undefined {
  const m = /^(.*):(\d+)\/(\d+)$/.exec(tag);
  if (m === null) return { key: tag, index: 0, count: 1 };
  const index = Number(m[2]);
  const count = Number(m[3]);
  return m[1] === undefined || index >= count ? undefined : { key: m[1], index, count };
}

export type ChatFinal = { status: 200; state: ChatStateJson } | { status: 404 } | { status: 'error'; detail: string };

export interface IrcVerifyInput {
  tracked: TrackedChat[];
  finals: Map<string, ChatFinal>;
  watcher: IrcWatcher;
  channels: readonly string[];
  rows: Map<string, Record<string, unknown>>;
  logsFor(requestIds: string[]): string[];
  /** What the Herald processes said about IRC (links, leases, lines not stored) between two times (ms since the phase began). */
  ircLog(fromMs: number, untilMs: number): string[];
}

export interface IrcVerdict {
  counts: PhaseCounts;
  violations: Violation[];
  violationCount: number;
  /** Sends whose loss could not be judged (the observer away when their lines may have gone out). */
  unjudged: string[];
  states: Record<string, number>;
  failedNotes: string[];
}

const squeeze = (s: string) => s.replace(/\s+/g, '');

export function verifyIrcChat(input: IrcVerifyInput): IrcVerdict {
  const { tracked, finals, watcher } = input;
  const byId = new Map(tracked.map((t) => [t.requestId, t]));
  // Distinct lines (by msgid: a live line and its replay are one), in every watched channel.
  const distinct = new Map<string, SeenLine>();
  const noMsgid: SeenLine[] = [];
  for (const l of watcher.lines) {
    if (!input.channels.includes(l.channel)) continue;
    if (l.msgid === undefined) noMsgid.push(l);
    else if (!distinct.has(l.msgid)) distinct.set(l.msgid, l);
  }
  const seen = [...distinct.values(), ...noMsgid];
  // Each line to its send: by its tag, else by the marker its text starts with.
  const markerOwner = new Map<string, string>();
  for (const t of tracked) markerOwner.set(markerOf(t.text) ?? '', t.requestId);
  const linesOf = new Map<string, SeenLine[]>();
  const orphans: SeenLine[] = [];
  for (const l of seen) {
    const key = l.tag !== undefined ? parseTag(l.tag)?.key : markerOwner.get(markerOf(l.text) ?? '');
    if (key === undefined || !byId.has(key)) orphans.push(l);
    else linesOf.set(key, [...(linesOf.get(key) ?? []), l]);
  }

  const violations: Violation[] = [];
  const flagged = new Map<ViolationKind, Set<string>>();
  const unjudged: string[] = [];
  const failedNotes: string[] = [];
  let extraMessages = 0;
  const states: Record<string, number> = { delivered: 0, unconfirmed: 0, failed: 0, pending: 0, missing: 0 };
  const describe = (l: SeenLine) => ({ conn: l.conn, channel: l.channel, nick: l.nick, msgid: l.msgid, tag: l.tag, replayed: l.replayed, at_s: (l.at / 1000).toFixed(2), text: l.text.slice(0, 80) });
  const ircLogOf = (ids: string[]): string[] => {
    const ts = ids.flatMap((id) => byId.get(id) ?? []);
    if (ts.length === 0) return [];
    return input.ircLog(Math.min(...ts.map((t) => t.createdAt)) - 2_000, Math.max(...ts.map((t) => t.endedAt ?? Infinity)) + 1_000);
  };
  const flag = (kind: ViolationKind, ids: string[], detail: string) => {
    const set = flagged.get(kind) ?? new Set<string>();
    flagged.set(kind, set);
    for (const id of ids) set.add(id);
    violations.push({
      kind,
      requestIds: ids,
      detail,
      evidence: {
        deliveries: ids.map((id) => {
          const t = byId.get(id);
          return {
            request_id: id,
            channel: t?.channel,
            sender: t?.sender,
            text: t?.text.slice(0, 80),
            final: finals.get(id),
            row: input.rows.get(`chat:${id}`),
            connector: t === undefined ? undefined : { accepted: t.accepted, posts: t.posts, timeline: t.timeline },
          };
        }),
        lines: ids.flatMap((id) => linesOf.get(id) ?? []).map(describe),
        herald_log: input.logsFor(ids.map((id) => `chat:${id}`)),
        irc_log: ircLogOf(ids),
      },
    });
  };

  for (const t of tracked) {
    const id = t.requestId;
    const f = finals.get(id);
    const state = f?.status === 200 ? f.state : undefined;
    states[state?.state ?? 'missing'] = (states[state?.state ?? 'missing'] ?? 0) + 1;
    if (t.vanished !== undefined) flag('lost', [id], `accepted, then forgotten by the bridge: ${t.vanished}`);
    if (t.regressed !== undefined) flag('lost', [id], `changed after it ended: ${t.regressed}`);
    if (f?.status === 404) {
      if (t.accepted) flag('lost', [id], 'accepted (202), but the bridge answers 404 at the end');
      else flag('stuck', [id], 'never acknowledged by the bridge, however often it was POSTed');
    } else if (f?.status === 'error') flag('stuck', [id], `no final state: ${f.detail}`);
    else if (state?.state === 'pending') {
      const row = input.rows.get(`chat:${id}`);
      flag('stuck', [id], `still pending after settling (row: ${String(row?.['status'] ?? '-')}, attempts ${String(row?.['attempts'] ?? '-')}, reason ${JSON.stringify(row?.['reason'] ?? null)})`);
    }

    const mine = linesOf.get(id) ?? [];
    // Who said it and where: the agent's own nick, in the channel it named.
    for (const l of mine) {
      if (l.nick.toLowerCase() !== t.sender.toLowerCase()) flag('misattributed', [id], `a line of it (${l.msgid ?? 'no msgid'}) came from ${l.nick}, not ${t.sender}`);
      if (l.channel !== t.channel) flag('misattributed', [id], `a line of it (${l.msgid ?? 'no msgid'}) is in ${l.channel}, not ${t.channel}`);
      if (l.tag === undefined) flag('misattributed', [id], `a line with its text (${l.msgid ?? 'no msgid'}) carries no +herald/delivery tag`);
    }
    // Parts: each exactly once.
    const parts = new Map<number, SeenLine[]>();
    let count: number | undefined;
    for (const l of mine) {
      const p = l.tag === undefined ? { index: 0, count: 1 } : parseTag(l.tag);
      if (p === undefined) continue;
      if (count !== undefined && count !== p.count) flag('misattributed', [id], `its lines say ${count} and ${p.count} parts`);
      count = p.count;
      parts.set(p.index, [...(parts.get(p.index) ?? []), l]);
    }
    const extra = [...parts.values()].filter((ls) => ls.length > 1);
    extraMessages += extra.reduce((n, ls) => n + ls.length - 1, 0);
    if (extra.length > 0) {
      // Lines of two server runs: the InspIRCd restarted (channel and history wiped) between the sends.
      const runs = new Set(extra.flatMap((ls) => ls.map((l) => parseMsgid(l.msgid)?.boot ?? '?')));
      const across = runs.size > 1 ? ` (in ${runs.size} runs of the server: it was restarted, wiping the channel's history, between the first send and the resend)` : '';
      flag('duplicate', [id], `${extra.map((ls) => `part ${parseTag(ls[0]?.tag ?? '')?.index ?? 0}: ${ls.length} lines (${ls.map((l) => `${l.msgid ?? 'no msgid'} at ${(l.at / 1000).toFixed(2)}s`).join(', ')})`).join('; ')}${across}`);
    }
    // The text, whole, once every part is in.
    if (count !== undefined && parts.size === count) {
      const joined = [...parts.entries()].sort((a, b) => a[0] - b[0]).map(([, ls]) => ls[0]?.text ?? '').join('');
      if (squeeze(joined) !== squeeze(t.text)) flag('misattributed', [id], `its lines' text differs from what was sent: ${JSON.stringify(joined.slice(0, 120))}`);
    }

    if (state === undefined) continue;
    const ids = state.message_ids ?? [];
    if (state.state === 'failed') {
      if (mine.length > 0) flag('failed-but-sent', [id], `failed (${state.reason ?? 'no reason'}) but ${mine.length} of its lines are in the channel`);
      else failedNotes.push(`${id.slice(0, 12)}: failed (${state.reason ?? 'no reason'}), nothing in the channel`);
      continue;
    }
    if (state.state !== 'delivered') continue;
    // Delivered: one msgid per part, each the line the observer read for that part.
    if (count !== undefined && ids.length !== count) flag('misattributed', [id], `delivered with ${ids.length} message_ids, its lines say ${count} parts`);
    let unjudgedHere = false;
    for (const [i, msgid] of ids.entries()) {
      const got = parts.get(i) ?? [];
      if (got.length === 0) {
        if (watcher.mustHaveSeen(t.channel, msgid)) flag('lost', [id], `delivered, part ${i} (${msgid}) never reached the channel though the observer was there`);
        else unjudgedHere = true;
      } else if (!got.some((l) => l.msgid === msgid)) flag('misattributed', [id], `delivered with part ${i} = ${msgid}, but that part is ${got.map((l) => l.msgid).join(', ')} in the channel`);
    }
    if (unjudgedHere) unjudged.push(`${id.slice(0, 12)} (${t.channel}, ${ids.join(',')})`);
  }
  // Two sends claiming one line.
  const owners = new Map<string, string[]>();
  for (const t of tracked) {
    const f = finals.get(t.requestId);
    if (f?.status !== 200) continue;
    for (const m of f.state.message_ids ?? []) if (m !== '') owners.set(m, [...(owners.get(m) ?? []), t.requestId]);
  }
  for (const [m, ids] of owners) if (ids.length > 1) flag('misattributed', ids, `${ids.length} sends report the same line ${m}`);
  for (const l of orphans) violations.push({ kind: 'orphan', requestIds: [], detail: `a line no send accounts for: ${JSON.stringify(describe(l))}` });

  const counts: PhaseCounts = {
    deliveries: tracked.length,
    posts: 0,
    dms: 0,
    edits: 0,
    messages: seen.length,
    duplicates: flagged.get('duplicate')?.size ?? 0,
    extraMessages,
    lost: flagged.get('lost')?.size ?? 0,
    stuck: flagged.get('stuck')?.size ?? 0,
    misattributed: flagged.get('misattributed')?.size ?? 0,
    editOrder: 0,
    failedButSent: flagged.get('failed-but-sent')?.size ?? 0,
    orphans: orphans.length,
    undecided: 0,
    // The report's columns: unconfirmed is the chat word for the outbox's unknown.
    states: { delivered: states['delivered'] ?? 0, failed: states['failed'] ?? 0, unknown: states['unconfirmed'] ?? 0, pending: states['pending'] ?? 0, missing: states['missing'] ?? 0 },
    failedUnmapped: 0,
    appliedEdits: 0,
    unappliedEdits: 0,
  };
  const violationCount = counts.duplicates + counts.lost + counts.stuck + counts.misattributed + counts.failedButSent + counts.orphans;
  return { counts, violations, violationCount, unjudged, states, failedNotes };
}

/** `chaos irc-chat k0-12 …` → `k0-12`. */
function markerOf(text: string): string | undefined {
  return /^chaos \S+ (k[0-9]+-[0-9]+) /.exec(text)?.[1];
}

export function connectorLine(stats: ChatConnectorStats): string {
  return `chat connectors: ${stats.posts} POSTs (${stats.reposts} re-POSTs, ${stats.blindReposts} blind), ${stats.gets} GETs, ${stats.networkErrors} network errors, ${stats.serverErrors} 5xx, ${stats.protocolErrors.length} unexpected 4xx`;
}
