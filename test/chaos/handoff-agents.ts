import { followUntil, getFromAny, HTTP_TIMEOUT_MS, postWithFailover, repostAfter, request, rotated, sleep, unlessBusy } from './agent-kit.js';
import type { Rng } from './prng.js';

/**
 * The agents of the handoff phase, speaking the bridge protocol over HTTP as real ones do: a sending
 * agent hands tasks to the other bot (POST /mcp/handoffs with a request_id, re-POSTed after no answer,
 * a 5xx, `unknown`, a few times after `failed`, and blindly now and then; followed to a final state
 * with GET /mcp/handoffs/{request_id}); a receiving agent waits for the next handoff in its bot's
 * inbox (GET /mcp/handoffs/inbox/next after its cursor) and acknowledges what it read. Both fail
 * over to another `serve` of their bot when theirs is down. Everything they see is kept for the verdict.
 */

/** Which way a handoff goes: bot A to bot B, or back. */
export type Direction = 'a-to-b' | 'b-to-a';

/** The contract's SentHandoff, as far as the phase reads it. */
export interface SentJson {
  request_id: string;
  event_id: string;
  state: 'pending' | 'delivered' | 'failed' | 'unknown';
  target_bot_id: string;
  channel_id: string;
  expires_at: string;
  created_at: string;
  url?: string;
  code?: string;
}

/** The contract's InboxHandoff. */
export interface InboxJson {
  id: string;
  event_id: string;
  source_bot_id: string;
  origin: { channel_id: string; thread_id: string | null; message_id: string | null; handoff_message_id: string };
  text: string;
  received_at: string;
  expires_at: string;
}

/** One handoff as its sending agent knows it. */
export interface SentHandoffTrack {
  requestId: string;
  direction: Direction;
  sourceBotId: string;
  targetBotId: string;
  channelId: string;
  inThread: boolean;
  text: string;
  /** The exact POST body; every re-POST sends it again. */
  payload: Record<string, unknown>;
  /** ms since the phase began. */
  createdAt: number;
  /** The event_id of the first 202 (every later answer must keep it). */
  eventId: string | undefined;
  accepted: boolean;
  posts: number;
  failedReposts: number;
  gaveUp: boolean;
  last: SentJson | undefined;
  lastCheck: number;
  unknownReposts: number;
  nextUnknownRepost: number;
  busy: boolean;
  /** The bridge forgot it after a 202, or answered another event_id for it. */
  vanished: string | undefined;
  deliveredUrl: string | undefined;
  /** Reported delivered, later something else. */
  regressed: string | undefined;
  /** When (epoch ms) it was first seen delivered. */
  deliveredSeenAt: number | undefined;
  timeline: string[];
}

/** One inbox item as the receiving agent read it. */
export interface ReadItem {
  bot: 'a' | 'b';
  item: InboxJson;
  /** Epoch ms of the first read. */
  readAt: number;
  /** How often the agent was handed this inbox id (re-reads after a lost ack are not duplicates). */
  reads: number;
  acked: boolean;
}

export interface AgentStats {
  posts: number;
  accepted: number;
  reposts: number;
  blindReposts: number;
  gets: number;
  waits: number;
  acks: number;
  networkErrors: number;
  serverErrors: number;
  protocolErrors: string[];
}

export function newAgentStats(): AgentStats {
  return { posts: 0, accepted: 0, reposts: 0, blindReposts: 0, gets: 0, waits: 0, acks: 0, networkErrors: 0, serverErrors: 0, protocolErrors: [] };
}

/** One bot's side as its agents reach it. */
export interface BotSide {
  name: 'a' | 'b';
  botId: string;
  bridgeToken: string;
  /** Its `serve` processes up now. */
  servers(): string[];
}

export interface AgentContext {
  t0: number;
  ledger: Map<string, SentHandoffTrack>;
  /** inbox key (`a:<id>` or `b:<id>`) → what the receiving agent read. */
  reads: Map<string, ReadItem>;
  stats: AgentStats;
  log(line: string): void;
  /** Channels (and threads) handoffs go to. */
  channels: readonly string[];
  threads: readonly string[];
  maxFailedReposts: number;
}

const PAUSE_MS = [250, 900] as const;
const ACTIONS = [
  ['send', 65],
  ['send-in-thread', 15],
  ['blind-repost', 20],
] as const;


/** An agent of bot `from` handing tasks to bot `to`. */
export class SendingAgent {
  private readonly plan: Rng;
  private readonly net: Rng;
  private readonly policy: Rng;
  private count = 0;
  private readonly mine: SentHandoffTrack[] = [];
  readonly direction: Direction;

  constructor(
    readonly id: number,
    rng: Rng,
    private readonly from: BotSide,
    private readonly to: BotSide,
    private readonly ctx: AgentContext,
  ) {
    this.plan = rng.fork(`sender-${id}/plan`);
    this.net = rng.fork(`sender-${id}/net`);
    this.policy = rng.fork(`sender-${id}/policy`);
    this.direction = from.name === 'a' ? 'a-to-b' : 'b-to-a';
  }

  private now(): number {
    return Date.now() - this.ctx.t0;
  }

  private note(t: SentHandoffTrack, event: string): void {
    if (t.timeline.length >= 60) t.timeline.splice(20, 1, '…');
    t.timeline.push(`${(this.now() / 1000).toFixed(2)}s ${event}`);
  }

  async act(running: () => boolean): Promise<void> {
    while (running()) {
      const action = this.plan.weighted(ACTIONS);
      try {
        await this.perform(action);
      } catch (err) {
        this.ctx.log(`  sender ${this.id} (${this.direction}): ${action} threw ${String(err)}`);
      }
      await sleep(this.plan.int(PAUSE_MS[0], PAUSE_MS[1]));
    }
  }

  private async perform(action: (typeof ACTIONS)[number][0]): Promise<void> {
    if (action === 'blind-repost') {
      const recent = this.mine.slice(-20);
      const t = recent[Math.floor(this.plan.next() * recent.length)];
      if (t === undefined) return;
      this.ctx.stats.blindReposts += 1;
      await this.submit(t, 'blind re-POST');
      return;
    }
    const inThread = action === 'send-in-thread' && this.ctx.threads.length > 0;
    const channelId = this.plan.pick(inThread ? this.ctx.threads : this.ctx.channels);
    const requestId = this.plan.hex(64);
    // Unique per handoff; now and then raw mentions, which must reach the other agent as text.
    const raw = this.plan.chance(0.2) ? ` @everyone <@${this.to.botId}>` : '';
    const text = `chaos handoff ${this.direction} s${this.id}-${++this.count} ${requestId.slice(0, 12)}${raw}`;
    const payload: Record<string, unknown> = { request_id: requestId, target_bot_id: this.to.botId, channel_id: channelId, text };
    if (inThread) payload['in_thread'] = true;
    const t: SentHandoffTrack = {
      requestId,
      direction: this.direction,
      sourceBotId: this.from.botId,
      targetBotId: this.to.botId,
      channelId,
      inThread,
      text,
      payload,
      createdAt: this.now(),
      eventId: undefined,
      accepted: false,
      posts: 0,
      failedReposts: 0,
      gaveUp: false,
      last: undefined,
      lastCheck: 0,
      unknownReposts: 0,
      nextUnknownRepost: 0,
      busy: false,
      vanished: undefined,
      deliveredUrl: undefined,
      regressed: undefined,
      deliveredSeenAt: undefined,
      timeline: [],
    };
    this.ctx.ledger.set(requestId, t);
    this.mine.push(t);
    await this.submit(t, 'first POST');
  }

  async submit(t: SentHandoffTrack, why: string): Promise<boolean> {
    return unlessBusy(t, false, () => this.submitNow(t, why));
  }

  private async submitNow(t: SentHandoffTrack, why: string): Promise<boolean> {
    t.posts += 1;
    this.ctx.stats.posts += 1;
    if (t.accepted) this.ctx.stats.reposts += 1;
    const reply = await postWithFailover(() => rotated(this.from.servers(), this.net), '/mcp/handoffs', this.from.bridgeToken, t.payload, this.ctx.stats, (line) => this.note(t, line), why);
    if (reply === undefined) return false;
    if (reply.status === 202) {
      const answer = reply.json as { handoff: SentJson; existing: boolean };
      if (t.accepted && !answer.existing && t.vanished === undefined) t.vanished = `a re-POST was answered existing:false after an earlier 202 (${why})`;
      t.accepted = true;
      this.ctx.stats.accepted += 1;
      this.observe(t, answer.handoff, `${why}: 202 existing:${answer.existing}`);
      return true;
    }
    this.ctx.stats.protocolErrors.push(`POST handoff ${t.requestId}: ${reply.status} ${JSON.stringify(reply.json)}`);
    this.note(t, `${why}: ${reply.status} ${JSON.stringify(reply.json)}`);
    return false;
  }

  private observe(t: SentHandoffTrack, h: SentJson, how: string): void {
    // One handoff is one envelope: its event_id never changes, however often it is re-POSTed or re-driven.
    if (t.eventId !== undefined && h.event_id !== t.eventId && t.vanished === undefined) t.vanished = `event_id changed from ${t.eventId} to ${h.event_id} (${how})`;
    t.eventId ??= h.event_id;
    if (t.deliveredUrl !== undefined && t.regressed === undefined && (h.state !== 'delivered' || h.url !== t.deliveredUrl)) {
      t.regressed = `reported delivered at ${t.deliveredUrl}, later ${h.state}${h.url !== undefined ? ` at ${h.url}` : ''} (${how})`;
    }
    if (h.state === 'delivered') {
      t.deliveredUrl ??= h.url;
      t.deliveredSeenAt ??= Date.now();
    }
    const changed = t.last?.state !== h.state;
    t.last = h;
    if (changed) this.note(t, `${how} → ${h.state}${h.code !== undefined ? ` ${h.code}` : ''}${h.url !== undefined ? ` ${h.url}` : ''}`);
  }

  /** Whether the sending agent is done with it. */
  static settled(t: SentHandoffTrack): boolean {
    return t.last?.state === 'delivered' || (t.last?.state === 'failed' && t.gaveUp);
  }

  /** Follow every open handoff: re-POST on `unknown`, on `failed` (a few times), when never acknowledged. */
  async followUp(running: () => boolean): Promise<void> {
    await followUntil(this.mine, (t) => SendingAgent.settled(t), 300, running, (t) => this.check(t));
  }

  private async check(t: SentHandoffTrack): Promise<void> {
    const acceptedBefore = t.accepted;
    const reply = await getFromAny(rotated(this.from.servers(), this.net), `/mcp/handoffs/${t.requestId}`, this.from.bridgeToken, this.ctx.stats);
    if (reply === undefined) return;
    if (reply.status === 404) {
      if (acceptedBefore && t.vanished === undefined) t.vanished = 'GET answered 404 after a 202';
      await this.submit(t, 're-POST (never acknowledged)');
      return;
    }
    if (reply.status !== 200) {
      this.ctx.stats.protocolErrors.push(`GET handoff ${t.requestId}: ${reply.status} ${JSON.stringify(reply.json)}`);
      return;
    }
    const h = reply.json as SentJson;
    this.observe(t, h, 'GET');
    await repostAfter(t, h, this.ctx.maxFailedReposts, this.policy, (why) => this.submit(t, why), (line) => this.note(t, line));
  }
}

/**
 * The agent reading bot `side`'s inbox: waits for the next handoff after its cursor, keeps it, and
 * acknowledges it (acknowledgements that got no answer are sent again with the next one).
 */
export class ReceivingAgent {
  private readonly net: Rng;
  private cursor: string | undefined;
  private readonly unacked = new Set<string>();

  constructor(
    rng: Rng,
    private readonly side: BotSide,
    private readonly ctx: AgentContext,
  ) {
    this.net = rng.fork(`receiver-${side.name}/net`);
  }

  /** Inbox ids read and not acknowledged yet. */
  get pendingAcks(): number {
    return this.unacked.size;
  }

  async run(running: () => boolean): Promise<void> {
    while (running()) {
      const servers = rotated(this.side.servers(), this.net);
      if (servers.length === 0) {
        await sleep(200);
        continue;
      }
      const server = servers[0] ?? '';
      try {
        await this.ackPending(server);
        this.ctx.stats.waits += 1;
        const query = `timeout_ms=1500${this.cursor !== undefined ? `&after=${this.cursor}` : ''}`;
        const reply = await request(server, 'GET', `/mcp/handoffs/inbox/next?${query}`, this.side.bridgeToken, undefined, HTTP_TIMEOUT_MS + 1_500);
        if (reply.status >= 500) {
          this.ctx.stats.serverErrors += 1;
          await sleep(200);
          continue;
        }
        if (reply.status !== 200) {
          this.ctx.stats.protocolErrors.push(`GET inbox/next (${this.side.name}): ${reply.status} ${JSON.stringify(reply.json)}`);
          await sleep(500);
          continue;
        }
        const item = (reply.json as { handoff: InboxJson | null }).handoff;
        if (item === null) continue;
        this.take(item);
        this.cursor = item.id;
      } catch {
        this.ctx.stats.networkErrors += 1;
        await sleep(200);
      }
    }
  }

  /** An inbox item read by the agent (in the run, or listed at the end). */
  take(item: InboxJson): void {
    const key = `${this.side.name}:${item.id}`;
    const known = this.ctx.reads.get(key);
    if (known !== undefined) known.reads += 1;
    else this.ctx.reads.set(key, { bot: this.side.name, item, readAt: Date.now(), reads: 1, acked: false });
    this.unacked.add(item.id);
  }

  private async ackPending(server: string): Promise<void> {
    if (this.unacked.size === 0) return;
    const ids = [...this.unacked].slice(0, 100);
    const reply = await request(server, 'POST', '/mcp/handoffs/inbox/ack', this.side.bridgeToken, { ids });
    if (reply.status !== 200) {
      if (reply.status >= 500) this.ctx.stats.serverErrors += 1;
      else this.ctx.stats.protocolErrors.push(`POST inbox/ack (${this.side.name}): ${reply.status} ${JSON.stringify(reply.json)}`);
      return;
    }
    this.ctx.stats.acks += 1;
    for (const id of ids) {
      this.unacked.delete(id);
      const read = this.ctx.reads.get(`${this.side.name}:${id}`);
      if (read !== undefined) read.acked = true;
    }
  }
}
