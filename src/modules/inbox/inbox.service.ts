import { EventEmitter } from 'node:events';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { components } from '../../../generated/api.js';
import type { Clock } from '../../infra/clock.js';
import { errorSummary, InvalidRequestError } from '../../infra/errors.js';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import type { InboundMessage, InboundReaction } from '../../platforms/platform.js';
import type { HandoffInboxRow } from '../handoffs/index.js';
import type { InboxMetrics } from './inbox.metrics.js';
import { addressedTo, type InboxScope, type ScopePorts } from './inbox.scope.js';
import {
  advanceCursor,
  cursorOf,
  deleteDmsOf,
  dmAuthors,
  insertEvent,
  lastHandoffRef,
  listEvents,
  newestId,
  pruneBeyondCount,
  pruneOlderThan,
  prunePushes,
} from './inbox.repository.js';
import type { InboxDb, InboxEventRow, NewInboxEventRow } from './inbox.table.js';
import { toWire, type InboxEvent } from './inbox.wire.js';

export type { InboxEvent } from './inbox.wire.js';
export type InboxPage = components['schemas']['InboxPage'];

/** The longest a wait for the next event may last (the contract's bound). */
export const MAX_WAIT_MS = 30_000;
/** A receipt that failed for a transient reason is tried again after this, doubling up to the most. */
const RETRY_FIRST_MS = 250;
const RETRY_MOST_MS = 10_000;
/** How long a live message is retried at most (a listened channel's catch-up covers longer outages). */
const RETRY_FOR_MS = 60_000;

/** How many events a scoped read looks at per statement while it fills a page. */
const SCAN = 200;

/** What the inbox asks of other modules and the platform (ports, never their tables). */
export interface InboxPorts extends ScopePorts {
  /** Herald's own user on the home platform: its default bot's, or `identity`'s bot's. */
  selfId(identity?: string): Promise<string>;
  /** The users of all of Herald's bots on the home platform (what they write is never heard). */
  ownBots(): Promise<ReadonlySet<string>>;
  /** Whether the user is registered with `identity`'s bot now. */
  isRegistered(userId: string, identity: string): Promise<boolean>;
  /** Which of these message ids Herald sent (deliveries). */
  sentByHerald(messageIds: readonly string[]): Promise<Set<string>>;
  /** The channel ids the operator opted in to listen (destinations), cached by the caller. */
  listened(): Promise<ReadonlySet<string>>;
  /** Whether the handoffs module decides this message (a handoff candidate while handoffs are on). */
  handoffClaims(message: InboundMessage): boolean;
  /** The guild a channel is in, if the platform says (a handoff's origin). */
  guildOf?(channelId: string): Promise<string | undefined>;
  /** Accepted handoffs after an id in the handoff inbox. */
  handoffsSince?(after: string, limit: number): Promise<HandoffInboxRow[]>;
}

export interface InboxServiceOptions {
  platform: string;
  /** Whether each new event gets a webhook push (HERALD_INBOX_WEBHOOK_URL is set). */
  push: boolean;
  /**
   * The identity the connector speaks as (the operator's policy): the webhook is the connector's,
   * so it is pushed what the connector may read, never another bot's DMs.
   */
  pushIdentity: string;
  /** Tell every process an event was stored (after the commit); `heardElsewhere` is their side. */
  publish: (id: string) => void;
  /** Wake the job runner (a push is due). */
  ring: () => void;
  log: Logger;
  metrics: InboxMetrics;
  waitPollMs: number;
}

/** How a message came: live from the gateway, or read back from a listened channel's history. */
export type HeardPath = 'live' | 'catch-up';

/**
 * The inbound inbox: decides what is heard (mentions of the bot, registered users' DMs, replies to
 * and reactions on Herald's messages, every message of a listened channel, handoffs), stores each
 * once, pages it, wakes waiters on every replica, and forgets what retention and unregistering say.
 */
export class InboxService {
  private readonly news = new EventEmitter();
  private readonly closing = new AbortController();

  constructor(
    private readonly db: Kysely<InboxDb>,
    private readonly ports: InboxPorts,
    private readonly clock: Clock,
    private readonly o: InboxServiceOptions,
  ) {
    this.news.setMaxListeners(0);
  }

  /**
   * Why this message is heard, or undefined: it is not stored at all. `identity` is the bot whose
   * session heard it: another bot than the default hears only the DMs written to it (by people
   * registered with it) and mentions of it; the rest said in channels is the default bot's to hear.
   */
  async classify(message: InboundMessage, path: HeardPath, identity: string = DEFAULT_IDENTITY): Promise<InboxEventRow['kind'] | undefined> {
    // What Herald's own bots write (each agent's sends) is never heard, by any of them.
    if ((await this.ports.ownBots()).has(message.authorId) || this.ports.handoffClaims(message)) return undefined;
    if (identity !== DEFAULT_IDENTITY) {
      if (path !== 'live') return undefined;
      if (message.guildId === undefined) return (await this.ports.isRegistered(message.authorId, identity)) ? 'dm' : undefined;
      // A reply to Herald's message is the default bot's to hear (kind reply), whichever bot it pings.
      const replyTo = message.heard?.replyTo ?? null;
      if (replyTo !== null && (await this.ports.sentByHerald([replyTo])).has(replyTo)) return undefined;
      return this.mentions(message, await this.ports.selfId(identity)) && (await this.mapped(message)) ? 'mention' : undefined;
    }
    const self = await this.ports.selfId();
    // A DM has no guild; a message read back from history is always from a listened guild channel.
    if (path === 'live' && message.guildId === undefined) return (await this.ports.isRegistered(message.authorId, DEFAULT_IDENTITY)) ? 'dm' : undefined;
    const replyTo = message.heard?.replyTo ?? null;
    if (replyTo !== null && (await this.ports.sentByHerald([replyTo])).has(replyTo)) return 'reply';
    // A mention is heard only where a destination maps the channel (or the thread's channel): the
    // bot is in channels the operator never gave it, and what is said there is not for the agent.
    if (this.mentions(message, self) && (await this.mapped(message))) return 'mention';
    if ((await this.ports.listened()).has(message.channelId)) return 'message';
    return undefined;
  }

  /** Whether the message mentions the bot `self`. */
  private mentions(message: InboundMessage, self: string): boolean {
    return (message.heard?.mentions ?? []).includes(self) || message.content.includes(`<@${self}>`) || message.content.includes(`<@!${self}>`);
  }

  /** Whether a destination maps the message's channel, or the channel of the thread it is in. */
  private async mapped(message: InboundMessage): Promise<boolean> {
    const byChannel = await this.ports.destinationsByChannel();
    if (byChannel.has(message.channelId)) return true;
    const thread = message.heard?.threadId ?? null;
    if (thread === null) return false;
    const parent = await this.ports.parentOf(thread);
    return parent !== undefined && byChannel.has(parent);
  }

  /** Hear a message (by `identity`'s bot): classified, then stored once. True when it is settled (stored, known, or not heard). */
  async hear(message: InboundMessage, path: HeardPath, identity: string = DEFAULT_IDENTITY): Promise<boolean> {
    const kind = await this.classify(message, path, identity);
    if (kind === undefined) return true;
    const h = message.heard;
    await this.store({
      // A mention of another bot is its own event: the default bot may keep the same message too.
      event_id: kind === 'mention' && identity !== DEFAULT_IDENTITY ? `${this.o.platform}:${message.messageId}:mention:${identity}` : `${this.o.platform}:${message.messageId}`,
      kind,
      platform: this.o.platform,
      channel_id: message.channelId,
      guild_id: message.guildId ?? null,
      thread_id: h?.threadId ?? null,
      message_id: message.messageId,
      author_id: message.authorId,
      author_name: h?.authorName ?? null,
      author_bot: message.authorIsBot,
      reply_to: h?.replyTo ?? null,
      // PostgreSQL's text refuses U+0000.
      content: message.content.replaceAll('\u0000', ''),
      reaction: null,
      attachments: JSON.stringify((h?.attachments ?? []).map((a) => ({ id: a.id, filename: a.filename, content_type: a.contentType, size: a.size, url: a.url }))),
      handoff: null,
      source_ref: null,
      created_at: message.createdAt,
      received_at: this.clock.now(),
      identity,
    }, path);
    if (kind === 'dm') await this.forgetIfUnregistered(message.authorId, identity);
    return true;
  }

  /**
   * Asked again once a DM event is stored: an unregister that committed while it was classified
   * has already forgotten the person's DMs (its news comes after its commit), and would leave this
   * one behind until the prune.
   */
  private async forgetIfUnregistered(userId: string, identity: string): Promise<void> {
    if (!(await this.ports.isRegistered(userId, identity))) await this.forget(userId, identity);
  }

  /**
   * A reaction (heard by `identity`'s bot): only on a message Herald posted, and in a DM only from
   * someone registered with that bot. Another bot than the default hears only those in its DMs.
   */
  async react(reaction: InboundReaction, identity: string = DEFAULT_IDENTITY): Promise<void> {
    if (identity !== DEFAULT_IDENTITY && reaction.guildId !== undefined) return;
    if (!(await this.ports.sentByHerald([reaction.messageId])).has(reaction.messageId)) return;
    if (reaction.guildId === undefined && !(await this.ports.isRegistered(reaction.userId, identity))) return;
    const now = this.clock.now();
    await this.store({
      event_id: `${this.o.platform}:${reaction.messageId}:reaction:${reaction.userId}:${reaction.emoji}`,
      kind: 'reaction',
      platform: this.o.platform,
      channel_id: reaction.channelId,
      guild_id: reaction.guildId ?? null,
      thread_id: null,
      message_id: reaction.messageId,
      author_id: reaction.userId,
      author_name: null,
      author_bot: false,
      reply_to: null,
      content: '',
      reaction: reaction.emoji,
      attachments: '[]',
      handoff: null,
      source_ref: null,
      created_at: now,
      received_at: now,
      identity,
    }, 'live');
    if (reaction.guildId === undefined) await this.forgetIfUnregistered(reaction.userId, identity);
  }

  /** Take in the handoffs accepted since the last one taken in (each once, as kind handoff). */
  async takeHandoffs(): Promise<number> {
    const since = this.ports.handoffsSince;
    if (since === undefined) return 0;
    let after = await lastHandoffRef(this.db);
    let taken = 0;
    for (;;) {
      const rows = await since(after, 100);
      for (const h of rows) {
        // A handoff is written in a guild's channel: the contract allows a null guild only in a DM.
        const guildId = (await this.ports.guildOf?.(h.origin_channel_id).catch(() => undefined)) ?? null;
        await this.store({
          event_id: `${this.o.platform}:${h.handoff_message_id}`,
          kind: 'handoff',
          platform: this.o.platform,
          channel_id: h.origin_thread_id ?? h.origin_channel_id,
          guild_id: guildId,
          thread_id: h.origin_thread_id,
          message_id: h.handoff_message_id,
          author_id: h.source_bot_id,
          author_name: null,
          author_bot: true,
          reply_to: h.origin_message_id,
          content: h.text,
          reaction: null,
          attachments: '[]',
          handoff: JSON.stringify({ event_id: h.event_id, source_bot_id: h.source_bot_id, expires_at: h.expires_at.toISOString() }),
          source_ref: h.id,
          created_at: h.received_at,
          received_at: this.clock.now(),
          identity: DEFAULT_IDENTITY,
        }, 'live');
        taken += 1;
      }
      const last = rows.at(-1);
      if (last === undefined || rows.length < 100) return taken;
      after = last.id;
    }
  }

  /**
   * The live stream's receipt: tried at once, and retried in the background while the store is
   * unreachable (up to a minute; a listened channel's catch-up reads it back after that).
   */
  admit(message: InboundMessage, path: HeardPath, identity: string = DEFAULT_IDENTITY): { done: boolean; firstTry: Promise<void>; settled: Promise<boolean> } {
    let tried: () => void = () => undefined;
    const firstTry = new Promise<void>((resolve) => (tried = resolve));
    const receipt = { done: false, firstTry, settled: Promise.resolve(false) };
    receipt.settled = this.hearRetrying(message, path, identity, () => tried()).then((ok) => {
      receipt.done = ok;
      tried();
      return ok;
    });
    return receipt;
  }

  close(): void {
    this.closing.abort();
  }

  private async hearRetrying(message: InboundMessage, path: HeardPath, identity: string, tried: () => void): Promise<boolean> {
    const deadline = Date.now() + RETRY_FOR_MS;
    let wait = RETRY_FIRST_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.hear(message, path, identity);
      } catch (err) {
        tried();
        // Ids only: never the content.
        const about = { err: errorSummary(err), message_id: message.messageId, channel_id: message.channelId, path, attempt };
        if (this.closing.signal.aborted || Date.now() + wait >= deadline) {
          this.o.log.warn(about, 'inbound message could not be stored; left to the catch-up of listened channels');
          return false;
        }
        this.o.log.warn({ ...about, retry_in_ms: wait }, 'inbound message could not be stored; retrying');
        await new Promise((r) => setTimeout(r, wait).unref());
        wait = Math.min(wait * 2, RETRY_MOST_MS);
      }
    }
  }

  private async store(event: NewInboxEventRow, path: HeardPath): Promise<void> {
    // The webhook is the connector's: pushed what the connector may read (another bot's DMs and mentions are not).
    const push = this.o.push && addressedTo({ guild_id: event.guild_id ?? null, kind: event.kind, identity: event.identity }, this.o.pushIdentity);
    const id = await insertEvent(this.db, event, push, this.clock.now());
    if (id === undefined) return;
    this.o.metrics.heard(event.kind);
    this.o.log.info({ inbox_id: id, kind: event.kind, channel_id: event.channel_id, message_id: event.message_id, path }, 'inbound event stored');
    if (push) this.o.ring();
    this.o.publish(id);
  }

  /** An event was stored (here or on another replica): waiters look now. */
  heardElsewhere(): void {
    this.news.emit('heard');
  }

  /** A page of what `scope` may see after `after` (default: its cursor). */
  async list(scope: InboxScope, after: string | undefined, limit: number): Promise<InboxPage> {
    const cursor = await cursorOf(this.db, scope.cursor);
    const rows = await this.visible(scope, after ?? cursor, limit);
    const items = rows.map(toWire);
    return { items, next_cursor: items.at(-1)?.id ?? null, cursor };
  }

  /** The first event `scope` may see after the cursor, waiting up to `timeoutMs` for one. */
  async next(scope: InboxScope, after: string | undefined, timeoutMs: number, signal?: AbortSignal): Promise<InboxEvent | null> {
    let from = after ?? (await cursorOf(this.db, scope.cursor));
    const deadline = Date.now() + Math.min(Math.max(0, timeoutMs), MAX_WAIT_MS);
    for (;;) {
      // Read before the scan, so the scan saw it: what this scope may not see up to it is passed for good.
      const newest = scope.visible === undefined ? from : await newestId(this.db);
      const [first] = await this.visible(scope, from, 1);
      if (first !== undefined) return toWire(first);
      if (BigInt(newest) > BigInt(from)) from = newest;
      const left = deadline - Date.now();
      if (left <= 0 || signal?.aborted === true) return null;
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          this.news.off('heard', done);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, Math.min(left, this.o.waitPollMs));
        this.news.on('heard', done);
        signal?.addEventListener('abort', done);
      });
    }
  }

  /** Move `scope`'s own cursor forward (another reader's stays where it is). */
  async ack(scope: InboxScope, cursor: string): Promise<string> {
    if (BigInt(cursor) > BigInt(await newestId(this.db))) throw new InvalidRequestError('cursor is past the newest event');
    return advanceCursor(this.db, scope.cursor, cursor, this.clock.now());
  }

  /** Up to `limit` events after `after` that `scope` may see, in order. */
  private async visible(scope: InboxScope, after: string, limit: number): Promise<InboxEventRow[]> {
    if (scope.visible === undefined) return listEvents(this.db, after, limit, scope.identity);
    const out: InboxEventRow[] = [];
    for (let from = after; ; ) {
      const batch = await listEvents(this.db, from, SCAN, scope.identity);
      out.push(...(await scope.visible(batch)));
      const last = batch.at(-1);
      if (out.length >= limit || last === undefined || batch.length < SCAN) return out.slice(0, limit);
      from = last.id;
    }
  }

  /** A person unregistered from `identity`'s bot: their stored DMs with it go (those with another bot stay). */
  async forget(userId: string, identity: string = DEFAULT_IDENTITY): Promise<number> {
    const n = await deleteDmsOf(this.db, userId, identity);
    if (n > 0) this.o.metrics.dropped('unregistered', n);
    this.o.log.info({ user_id: userId, identity, deleted: n }, 'stored DMs of an unregistered user deleted');
    return n;
  }

  /** Retention: by age, by count per channel, and DMs of anyone no longer registered (should news of an unregister be lost). */
  async prune(now: Date, retentionMs: number, maxPerChannel: number): Promise<number> {
    const aged = await pruneOlderThan(this.db, new Date(now.getTime() - retentionMs));
    await prunePushes(this.db, new Date(now.getTime() - retentionMs));
    if (aged > 0) this.o.metrics.dropped('age', aged);
    const counted = await pruneBeyondCount(this.db, maxPerChannel);
    if (counted > 0) this.o.metrics.dropped('count', counted);
    let forgotten = 0;
    for (const { userId, identity } of await dmAuthors(this.db)) if (!(await this.ports.isRegistered(userId, identity))) forgotten += await this.forget(userId, identity);
    return aged + counted + forgotten;
  }
}
