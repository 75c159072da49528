import { followUntil, getFromAny, postWithFailover, rotated, sleep, unlessBusy } from './agent-kit.js';
import type { Rng } from './prng.js';

/**
 * Simulated agents sending chat lines over the bridge (`POST /mcp/chat/messages`, openapi/chat.yaml)
 * as real connectors do: a fresh request_id per line, the same request again after a network error
 * or a 5xx (another `serve` when theirs is down), now and then a blind re-POST, and polling
 * `GET /mcp/chat/messages/{id}` until the send ends delivered, unconfirmed or failed. A chat send is
 * final once it ends: a re-POST answers it as it is, it is not sent again. Every send is tracked in
 * the ledger the verdict reads (irc-verify.ts).
 */

/** The chat send's state as the bridge answers it. */
export interface ChatStateJson {
  id: string;
  state: 'pending' | 'delivered' | 'unconfirmed' | 'failed';
  channel: string;
  sender: string;
  message_ids?: string[];
  reason?: string;
}

export interface TrackedChat {
  /** The request_id given, which is also the send's id and every line's key (`+herald/delivery`). */
  requestId: string;
  connector: number;
  channel: string;
  sender: string;
  text: string;
  /** Long enough to be split into several lines. */
  long: boolean;
  /** The exact POST body; every re-POST sends it again. */
  payload: Record<string, unknown>;
  /** ms since the phase began. */
  createdAt: number;
  accepted: boolean;
  posts: number;
  last: ChatStateJson | undefined;
  /** When (ms since the phase began) a final state was first seen. */
  endedAt: number | undefined;
  lastCheck: number;
  busy: boolean;
  /** The bridge forgot a send after answering 202 for it. */
  vanished: string | undefined;
  /** It ended, and later the bridge answered another state. */
  regressed: string | undefined;
  timeline: string[];
}

export interface ChatConnectorStats {
  posts: number;
  accepted: number;
  reposts: number;
  blindReposts: number;
  gets: number;
  networkErrors: number;
  serverErrors: number;
  protocolErrors: string[];
}

export function newChatStats(): ChatConnectorStats {
  return { posts: 0, accepted: 0, reposts: 0, blindReposts: 0, gets: 0, networkErrors: 0, serverErrors: 0, protocolErrors: [] };
}

export interface ChatConnectorContext {
  phase: string;
  t0: number;
  bridgeToken: string;
  servers(): string[];
  ledger: Map<string, TrackedChat>;
  stats: ChatConnectorStats;
  log(line: string): void;
  channels: readonly string[];
  senders: readonly string[];
  /** The pause between two actions, ms. */
  pauseMs: readonly [number, number];
}

type Action = 'line' | 'long' | 'blind-repost';
const ACTIONS: readonly (readonly [Action, number])[] = [
  ['line', 75],
  ['long', 10],
  ['blind-repost', 15],
];
const FINAL = new Set(['delivered', 'unconfirmed', 'failed']);


export class ChatConnector {
  private readonly plan: Rng;
  private readonly net: Rng;
  private count = 0;
  private readonly mine: TrackedChat[] = [];

  constructor(
    readonly id: number,
    rng: Rng,
    private readonly ctx: ChatConnectorContext,
  ) {
    this.plan = rng.fork(`chat-connector-${id}/plan`);
    this.net = rng.fork(`chat-connector-${id}/net`);
  }

  private now(): number {
    return Date.now() - this.ctx.t0;
  }

  private note(t: TrackedChat, event: string): void {
    if (t.timeline.length >= 60) t.timeline.splice(20, 1, '…');
    t.timeline.push(`${(this.now() / 1000).toFixed(2)}s ${event}`);
  }

  static settled(t: TrackedChat): boolean {
    return t.last !== undefined && FINAL.has(t.last.state);
  }

  async act(running: () => boolean): Promise<void> {
    while (running()) {
      const action = this.plan.weighted(ACTIONS);
      try {
        await this.perform(action);
      } catch (err) {
        this.ctx.log(`  chat connector ${this.id}: ${action} threw ${String(err)}`);
      }
      await sleep(this.plan.int(this.ctx.pauseMs[0], this.ctx.pauseMs[1]));
    }
  }

  private async perform(action: Action): Promise<void> {
    if (action === 'blind-repost') {
      const recent = this.mine.slice(-20);
      const t = recent[Math.floor(this.plan.next() * recent.length)];
      if (t === undefined) return;
      this.ctx.stats.blindReposts += 1;
      await this.submit(t, 'blind re-POST');
      return;
    }
    const channel = this.plan.pick(this.ctx.channels);
    const sender = this.plan.pick(this.ctx.senders);
    const marker = `k${this.id}-${++this.count}`;
    // A unique marker first, so a line is told apart by its text alone, whoever the observer is.
    let text = `chaos ${this.ctx.phase} ${marker} line`;
    if (action === 'long') {
      // Several IRC lines (split to the server's line length): every part must arrive once.
      const words = Array.from({ length: this.plan.int(60, 120) }, (_, i) => `${marker}w${i}`);
      text = `chaos ${this.ctx.phase} ${marker} long ${words.join(' ')}`;
    }
    const requestId = this.plan.hex(32);
    const t: TrackedChat = {
      requestId,
      connector: this.id,
      channel,
      sender,
      text,
      long: action === 'long',
      payload: { request_id: requestId, channel, text, sender, transport: 'irc' },
      createdAt: this.now(),
      accepted: false,
      posts: 0,
      last: undefined,
      endedAt: undefined,
      lastCheck: 0,
      busy: false,
      vanished: undefined,
      regressed: undefined,
      timeline: [],
    };
    this.ctx.ledger.set(requestId, t);
    this.mine.push(t);
    await this.submit(t, 'first POST');
  }

  private servers(): string[] {
    return rotated(this.ctx.servers(), this.net);
  }

  async submit(t: TrackedChat, why: string): Promise<boolean> {
    return unlessBusy(t, false, () => this.submitNow(t, why));
  }

  private async submitNow(t: TrackedChat, why: string): Promise<boolean> {
    t.posts += 1;
    this.ctx.stats.posts += 1;
    if (t.accepted) this.ctx.stats.reposts += 1;
    const reply = await postWithFailover(() => this.servers(), '/mcp/chat/messages', this.ctx.bridgeToken, t.payload, this.ctx.stats, (line) => this.note(t, line), why);
    if (reply === undefined) return false;
    if (reply.status === 202) {
      t.accepted = true;
      this.ctx.stats.accepted += 1;
      this.observe(t, reply.json as ChatStateJson, `${why}: 202`);
      return true;
    }
    this.ctx.stats.protocolErrors.push(`POST ${t.requestId}: ${reply.status} ${JSON.stringify(reply.json)}`);
    this.note(t, `${why}: ${reply.status} ${JSON.stringify(reply.json)}`);
    return false;
  }

  private observe(t: TrackedChat, state: ChatStateJson, how: string): void {
    const before = t.last;
    if (before !== undefined && FINAL.has(before.state) && t.regressed === undefined && (state.state !== before.state || JSON.stringify(state.message_ids ?? []) !== JSON.stringify(before.message_ids ?? []))) {
      t.regressed = `ended ${before.state} ${JSON.stringify(before.message_ids ?? [])}, later ${state.state} ${JSON.stringify(state.message_ids ?? [])} (${how})`;
    }
    if (FINAL.has(state.state)) t.endedAt ??= this.now();
    t.last = state;
    if (before?.state !== state.state) this.note(t, `${how} → ${state.state}${state.reason !== undefined ? ` (${state.reason})` : ''}${state.message_ids !== undefined ? ` ${state.message_ids.join(',')}` : ''}`);
  }

  /** Poll every send not ended yet; re-POST one the bridge never acknowledged. */
  async followUp(running: () => boolean): Promise<void> {
    await followUntil(this.mine, (t) => ChatConnector.settled(t), 300, running, (t) => this.check(t));
  }

  private async check(t: TrackedChat): Promise<void> {
    const acceptedBefore = t.accepted;
    const reply = await getFromAny(this.servers(), `/mcp/chat/messages/${t.requestId}`, this.ctx.bridgeToken, this.ctx.stats);
    if (reply === undefined) return;
    if (reply.status === 404) {
      if (acceptedBefore && t.vanished === undefined) t.vanished = 'GET answered 404 after a 202';
      await this.submit(t, 're-POST (never acknowledged)');
      return;
    }
    if (reply.status !== 200) {
      this.ctx.stats.protocolErrors.push(`GET ${t.requestId}: ${reply.status} ${JSON.stringify(reply.json)}`);
      return;
    }
    this.observe(t, reply.json as ChatStateJson, 'GET');
  }
}
