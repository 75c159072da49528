import { createHash } from 'node:crypto';
import { deliveryNonce } from '../../src/modules/deliveries/delivery.js';
import { SANDBOX_IDS, SANDBOX_MEMBER_IDS, type DiscordSandbox } from '../../src/platforms/discord/sandbox/sandbox.js';
import { checkDue, errorName, getFromAny, postWithFailover, request, rotated, sleep, type Reply } from './agent-kit.js';
import type { Rng } from './prng.js';

/**
 * The agents of the discord-chat phase, speaking the bridge over HTTP as real ones do:
 * - chat lines (`POST /mcp/chat/messages`, transport discord) under several senders, re-POSTed
 *   with the same request_id after a network error or a 5xx (and now and then blindly), followed
 *   with `GET /mcp/chat/messages/{id}` to a final state;
 * - commands a person asked for in a message (written in the sandbox Discord), executed with
 *   `POST /mcp/commands/run` (`responseMode: discord`), asked again under the same key until the
 *   answer is final, the reply followed with `GET /admin/deliveries/{request_id}`;
 * - slash commands the person invokes through the sandbox's gateway (`sandbox.invoke`).
 * Every request they make is tracked for the verdict (discord-chat-verify.ts).
 */

/** What the chat API answers for a send (openapi/chat.yaml ChatSend). */
export interface ChatSendJson {
  id: string;
  transport: string;
  channel: string;
  sender: string;
  state: 'pending' | 'delivered' | 'unconfirmed' | 'failed';
  message_ids?: string[];
  reason?: string;
}

export interface ChatLine {
  id: string;
  connector: number;
  sender: string;
  /** The channel as POSTed (a name, #name or id) and the channel id it means. */
  channelArg: string;
  channelId: string;
  text: string;
  payload: Record<string, unknown>;
  createdAt: number;
  accepted: boolean;
  posts: number;
  last: ChatSendJson | undefined;
  /** The first final state seen; a later different one is a regression. */
  finalSeen: ChatSendJson | undefined;
  regressed: string | undefined;
  vanished: string | undefined;
  busy: boolean;
  lastCheck: number;
  timeline: string[];
}

/** A command a person asked for, executed by an agent with responseMode discord. */
export interface CommandAsk {
  key: string;
  connector: number;
  channelId: string;
  command: string;
  sourceMessageId: string;
  createdAt: number;
  /** The reply's delivery id and nonce, derived from the key as Herald derives them. */
  replyRequestId: string;
  replyNonce: string;
  runs: number;
  /** The final answer (ok, or a refusal other than in_progress/busy/timed_out). */
  result: RunResult | undefined;
  /** Every answer's category seen (null for ok), in order. */
  answers: string[];
  replyState: string | undefined;
  busy: boolean;
  lastCheck: number;
  timeline: string[];
}

/** A slash command invoked through the gateway. */
export interface SlashAsk {
  n: number;
  connector: number;
  at: number;
  endedAt: number;
  outcome: 'answered' | 'unanswered' | 'not connected' | 'error';
  detail: string;
}

export interface RunResult {
  ok: boolean;
  error: { category: string; reason: string } | null;
  outputs: { content: string; delivery?: { request_id: string } }[];
  sideEffectsMayHaveOccurred: boolean;
  replayed: boolean;
}

export interface ChatStats {
  posts: number;
  reposts: number;
  blindReposts: number;
  gets: number;
  runs: number;
  networkErrors: number;
  serverErrors: number;
  protocolErrors: string[];
}

export function newChatStats(): ChatStats {
  return { posts: 0, reposts: 0, blindReposts: 0, gets: 0, runs: 0, networkErrors: 0, serverErrors: 0, protocolErrors: [] };
}

export interface ChatAgentContext {
  t0: number;
  bridgeToken: string;
  sandbox: DiscordSandbox;
  servers(): string[];
  lines: Map<string, ChatLine>;
  asks: Map<string, CommandAsk>;
  slashes: SlashAsk[];
  stats: ChatStats;
  log(line: string): void;
}

/** The senders the agents speak as. */
const SENDERS = ['ada', 'bob', 'cleo', 'dmitri'] as const;
/** Channels by how the line names them: by name, #name, or id. */
const CHAT_CHANNELS: readonly { arg: string; id: string }[] = [
  { arg: 'alerts', id: SANDBOX_IDS.channels.alerts },
  { arg: '#deals', id: SANDBOX_IDS.channels.deals },
  { arg: SANDBOX_IDS.channels.digest, id: SANDBOX_IDS.channels.digest },
];
/** The channels commands are asked for in (the reply goes there). */
const COMMAND_CHANNELS = [SANDBOX_IDS.channels.alerts, SANDBOX_IDS.channels.deals, SANDBOX_IDS.channels.ops] as const;
export const MANAGE_GUILD = String(1 << 5);
/** Answers that say "ask again with the same key". */
const NOT_FINAL = new Set(['in_progress', 'busy', 'timed_out']);

type Action = 'chat' | 'chat-blind' | 'command' | 'slash';
const ACTIONS: readonly (readonly [Action, number])[] = [
  ['chat', 55],
  ['chat-blind', 10],
  ['command', 22],
  ['slash', 10],
];

/** The reply delivery's id for output 0 of the run under `key` (src/modules/commands/command.service.ts derives it so). */
export function replyRequestIdOf(key: string): string {
  return createHash('sha256').update(`command-reply\0${key}\0${0}`).digest('hex');
}


export class ChatAgent {
  private readonly plan: Rng;
  private readonly net: Rng;
  private count = 0;
  private readonly myLines: ChatLine[] = [];
  private readonly myAsks: CommandAsk[] = [];

  constructor(
    readonly id: number,
    rng: Rng,
    private readonly ctx: ChatAgentContext,
  ) {
    this.plan = rng.fork(`agent-${id}/plan`);
    this.net = rng.fork(`agent-${id}/net`);
  }

  private now(): number {
    return Date.now() - this.ctx.t0;
  }

  private note(timeline: string[], event: string): void {
    if (timeline.length >= 60) timeline.splice(20, 1, '…');
    timeline.push(`${(this.now() / 1000).toFixed(2)}s ${event}`);
  }

  async act(running: () => boolean): Promise<void> {
    while (running()) {
      const action = this.plan.weighted(ACTIONS);
      try {
        await this.perform(action);
      } catch (err) {
        this.ctx.log(`  agent ${this.id}: ${action} threw ${String(err)}`);
      }
      await sleep(this.plan.int(300, 1_000));
    }
  }

  private async perform(action: Action): Promise<void> {
    switch (action) {
      case 'chat': {
        const channel = this.plan.pick(CHAT_CHANNELS);
        const sender = this.plan.pick(SENDERS);
        const id = this.plan.hex(32);
        const text = `chaos chat a${this.id}-${++this.count} from ${sender} (${id.slice(0, 8)})`;
        const line: ChatLine = {
          id,
          connector: this.id,
          sender,
          channelArg: channel.arg,
          channelId: channel.id,
          text,
          payload: { channel: channel.arg, text, sender, transport: 'discord', request_id: id },
          createdAt: this.now(),
          accepted: false,
          posts: 0,
          last: undefined,
          finalSeen: undefined,
          regressed: undefined,
          vanished: undefined,
          busy: false,
          lastCheck: 0,
          timeline: [],
        };
        this.ctx.lines.set(id, line);
        this.myLines.push(line);
        await this.submitLine(line, 'first POST');
        return;
      }
      case 'chat-blind': {
        const recent = this.myLines.slice(-20);
        const line = recent[Math.floor(this.plan.next() * recent.length)];
        if (line === undefined) return;
        this.ctx.stats.blindReposts += 1;
        await this.submitLine(line, 'blind re-POST');
        return;
      }
      case 'command': {
        const channelId = this.plan.pick(COMMAND_CHANNELS);
        const key = `chaos-${this.plan.hex(24)}`;
        // The person asks in Discord; that message is their consent to one command.
        const source = this.ctx.sandbox.writeAsUser(SANDBOX_MEMBER_IDS.manager, channelId, `Herald, list the destinations please (${key.slice(6, 14)})`);
        const replyRequestId = replyRequestIdOf(key);
        const ask: CommandAsk = {
          key,
          connector: this.id,
          channelId,
          command: 'destinations list',
          sourceMessageId: source.id,
          createdAt: this.now(),
          replyRequestId,
          replyNonce: deliveryNonce(replyRequestId),
          runs: 0,
          result: undefined,
          answers: [],
          replyState: undefined,
          busy: false,
          lastCheck: 0,
          timeline: [],
        };
        this.ctx.asks.set(key, ask);
        this.myAsks.push(ask);
        await this.run(ask, 'first run');
        return;
      }
      case 'slash': {
        const n = this.ctx.slashes.length + 1;
        const at = this.now();
        const channelId = this.plan.pick(COMMAND_CHANNELS);
        const slash: SlashAsk = { n, connector: this.id, at, endedAt: at, outcome: 'error', detail: '' };
        this.ctx.slashes.push(slash);
        try {
          const reply = await this.ctx.sandbox.invoke({ userId: SANDBOX_MEMBER_IDS.manager, guildId: SANDBOX_IDS.guild, channelId, command: 'destinations', subcommand: 'list', permissions: MANAGE_GUILD }, 6_000);
          slash.outcome = 'answered';
          slash.detail = `type ${reply.type}: ${(reply.data?.content ?? '').slice(0, 80)}`;
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          slash.outcome = message.includes('did not answer') ? 'unanswered' : message.includes('not connected') ? 'not connected' : 'error';
          slash.detail = message;
        }
        slash.endedAt = this.now();
        return;
      }
    }
  }

  /** Servers in a random order: the agent's own first, the others as failover. */
  private servers(): string[] {
    return rotated(this.ctx.servers(), this.net);
  }

  private async submitLine(line: ChatLine, why: string): Promise<void> {
    if (line.busy || this.ctx.servers().length === 0) return;
    line.busy = true;
    try {
      line.posts += 1;
      this.ctx.stats.posts += 1;
      if (line.accepted) this.ctx.stats.reposts += 1;
      const reply = await postWithFailover(() => this.servers(), '/mcp/chat/messages', this.ctx.bridgeToken, line.payload, this.ctx.stats, (l) => this.note(line.timeline, l), why);
      if (reply === undefined) return;
      if (reply.status === 202) {
        line.accepted = true;
        this.observeLine(line, reply.json as ChatSendJson, `${why}: 202`);
        return;
      }
      this.ctx.stats.protocolErrors.push(`POST chat ${line.id}: ${reply.status} ${JSON.stringify(reply.json)}`);
      this.note(line.timeline, `${why}: ${reply.status} ${JSON.stringify(reply.json)}`);
    } finally {
      line.busy = false;
    }
  }

  private observeLine(line: ChatLine, state: ChatSendJson, how: string): void {
    const final = state.state !== 'pending';
    if (line.finalSeen !== undefined && line.regressed === undefined && (state.state !== line.finalSeen.state || JSON.stringify(state.message_ids ?? []) !== JSON.stringify(line.finalSeen.message_ids ?? []))) {
      line.regressed = `was ${line.finalSeen.state} ${JSON.stringify(line.finalSeen.message_ids ?? [])}, later ${state.state} ${JSON.stringify(state.message_ids ?? [])} (${how})`;
    }
    if (final) line.finalSeen ??= state;
    const changed = line.last?.state !== state.state;
    line.last = state;
    if (changed) this.note(line.timeline, `${how} → ${state.state}${state.message_ids !== undefined ? ` ${state.message_ids.join(',')}` : ''}${state.reason !== undefined ? ` (${state.reason.slice(0, 120)})` : ''}`);
  }

  /** Execute (again) under the ask's key; false when no server gave an answer. */
  private async run(ask: CommandAsk, why: string): Promise<void> {
    if (ask.busy || this.ctx.servers().length === 0) return;
    ask.busy = true;
    try {
      ask.runs += 1;
      this.ctx.stats.runs += 1;
      const body = {
        command: ask.command,
        userId: SANDBOX_MEMBER_IDS.manager,
        guildId: SANDBOX_IDS.guild,
        channelId: ask.channelId,
        mode: 'execute',
        sourceMessageId: ask.sourceMessageId,
        idempotencyKey: ask.key,
        responseMode: 'discord',
      };
      for (const server of this.servers()) {
        let reply: Reply;
        try {
          reply = await request(server, 'POST', '/mcp/commands/run', this.ctx.bridgeToken, body);
        } catch (err) {
          this.ctx.stats.networkErrors += 1;
          this.note(ask.timeline, `${why}: no answer (${errorName(err)})`);
          continue;
        }
        if (reply.status >= 500) {
          this.ctx.stats.serverErrors += 1;
          this.note(ask.timeline, `${why}: ${reply.status} ${JSON.stringify(reply.json).slice(0, 80)}`);
          continue;
        }
        if (reply.status !== 200) {
          this.ctx.stats.protocolErrors.push(`run ${ask.key}: ${reply.status} ${JSON.stringify(reply.json)}`);
          this.note(ask.timeline, `${why}: ${reply.status} ${JSON.stringify(reply.json)}`);
          return;
        }
        const result = reply.json as RunResult;
        const category = result.error?.category ?? null;
        ask.answers.push(category ?? 'ok');
        this.note(ask.timeline, `${why}: ${category ?? 'ok'}${result.replayed ? ' (replayed)' : ''}${result.outputs[0]?.delivery !== undefined ? ` reply ${result.outputs[0].delivery.request_id.slice(0, 12)}` : ''}`);
        if (category !== null && NOT_FINAL.has(category)) return;
        if (ask.result !== undefined && JSON.stringify({ ...ask.result, replayed: false, elapsedMs: 0 }) !== JSON.stringify({ ...result, replayed: false, elapsedMs: 0 })) {
          this.note(ask.timeline, `a later final answer differs from the first: ${JSON.stringify(result).slice(0, 200)}`);
        }
        ask.result ??= result;
        return;
      }
    } finally {
      ask.busy = false;
    }
  }

  static lineSettled(line: ChatLine): boolean {
    return line.last !== undefined && line.last.state !== 'pending';
  }

  static askSettled(ask: CommandAsk): boolean {
    if (ask.result === undefined) return false;
    const delivery = ask.result.outputs[0]?.delivery;
    if (delivery === undefined) return true;
    return ask.replyState === 'delivered' || ask.replyState === 'failed';
  }

  /** Follow every open line and ask as an agent would (each about once a second), until `running()` turns false. */
  async followUp(running: () => boolean): Promise<void> {
    while (running()) {
      if (!(await checkDue(this.myLines, (l) => ChatAgent.lineSettled(l), 1_000, running, (l) => this.checkLine(l)))) return;
      const askAgain = (ask: CommandAsk) => (ask.result === undefined ? this.run(ask, 'ask again (same key)') : this.checkReply(ask));
      if (!(await checkDue(this.myAsks, (a) => ChatAgent.askSettled(a), 1_000, running, askAgain))) return;
      await sleep(200);
    }
  }

  private get(path: string): Promise<Reply | undefined> {
    return getFromAny(this.servers(), path, this.ctx.bridgeToken, this.ctx.stats);
  }

  private async checkLine(line: ChatLine): Promise<void> {
    const acceptedBefore = line.accepted;
    const reply = await this.get(`/mcp/chat/messages/${line.id}`);
    if (reply === undefined) return;
    if (reply.status === 404) {
      if (acceptedBefore && line.vanished === undefined) line.vanished = 'GET answered 404 after a 202';
      await this.submitLine(line, 're-POST (never acknowledged)');
      return;
    }
    if (reply.status !== 200) {
      this.ctx.stats.protocolErrors.push(`GET chat ${line.id}: ${reply.status} ${JSON.stringify(reply.json)}`);
      return;
    }
    this.observeLine(line, reply.json as ChatSendJson, 'GET');
  }

  private async checkReply(ask: CommandAsk): Promise<void> {
    const id = ask.result?.outputs[0]?.delivery?.request_id;
    if (id === undefined) return;
    const reply = await this.get(`/admin/deliveries/${id}`);
    if (reply === undefined) return;
    if (reply.status !== 200) {
      this.note(ask.timeline, `GET reply: ${reply.status} ${JSON.stringify(reply.json).slice(0, 120)}`);
      return;
    }
    const state = (reply.json as { state: string }).state;
    if (state !== ask.replyState) this.note(ask.timeline, `GET reply → ${state}`);
    ask.replyState = state;
  }
}
