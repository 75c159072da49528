import { DEFAULT_IDENTITY } from '../infra/policy/identity.js';
import type { Invokers } from './commands.js';
import type { ChannelInfo, FileLimits, InboundMessage, InboundReaction, MemberInfo, OutgoingMessage, SeenMessage, SentMessage, TransportName, HistoryPages } from './messages.js';

export type { Address, ArchivedAttachment, ArchivedEmbed, ArchivedMessage, ChannelInfo, FileLimits, HeardDetails, HistoryPages, InboundMessage, InboundReaction, MemberInfo, OutgoingFile, OutgoingMessage, SeenMessage, SentMessage, TransportName } from './messages.js';

/**
 * Why a platform call failed, in the terms the outbox acts on: retry later, or fail the job with a
 * protocol code.
 */
export type TransportFailure =
  | {
      kind: 'transient';
      retryAfterMs?: number;
      detail: string;
      /**
       * A send that failed this way may still have created the message (a 5xx, a dropped
       * connection, a timeout after the request went out). False or absent: it certainly did not.
       */
      mayHaveCreated?: boolean;
      /** The request was abandoned before it left, past its `SendDeadline`. */
      departedLate?: boolean;
      /**
       * Nothing was sent: the connection the call needs is held by another replica (a singleton).
       * The outbox puts the job back at once without spending an attempt, for the holder to take.
       */
      heldElsewhere?: boolean;
    }
  | { kind: 'recipient_unreachable'; detail: string }
  | { kind: 'not_found'; detail: string }
  | { kind: 'rejected'; detail: string };

export class TransportError extends Error {
  constructor(readonly failure: TransportFailure) {
    super(failure.detail);
    this.name = 'TransportError';
  }
}

/**
 * Who a message may notify. Absent: no one (every send and edit is mention-inert). Only a
 * bot-to-bot handoff names a user here: its target bot.
 */
export interface Mentions {
  users: readonly string[];
}

/**
 * How late a create may leave. A resend of a create that may have happened relies on the
 * platform's dedup window (Discord's nonce), which counts from the earlier request: it must leave
 * by `notAfter`. The check is made just before each try leaves (after any rate budget and client
 * queue); a try that would leave later is abandoned with a transient failure carrying
 * `departedLate` (and `mayHaveCreated` only if an earlier try of this same call went out).
 */
export interface SendDeadline {
  notAfter: Date;
}

export interface Sender {
  /**
   * Create a message. Every call for one job passes the same `idempotencyKey`; where the platform
   * honours one (`capabilities.idempotentSend`), a repeat within its window returns the first message.
   */
  send(channelId: string, message: OutgoingMessage, idempotencyKey: string, signal: AbortSignal, mentions?: Mentions, deadline?: SendDeadline): Promise<SentMessage>;
}

export interface DirectMessages {
  /** The direct-message channel with a user (opened if needed). */
  openDm(userId: string, signal: AbortSignal): Promise<string>;
}

export interface Editor {
  /** Replace the parts of a message that `message` includes. Idempotent. */
  edit(channelId: string, messageId: string, message: OutgoingMessage, signal: AbortSignal): Promise<void>;
}

/** Herald's own reaction on a message (Discord's reaction PUT/DELETE, Slack's reactions.add/remove). */
export interface Reactions {
  /** Add Herald's reaction; one already there is success (idempotent). A unicode emoji, or `name:id`. */
  add(channelId: string, messageId: string, emoji: string, signal: AbortSignal): Promise<void>;
  /** Take Herald's reaction off; one already gone is success (idempotent). */
  remove(channelId: string, messageId: string, emoji: string, signal: AbortSignal): Promise<void>;
}

/** What a send can say besides where: a reply to a message, a thread of the channel. */
export interface Threading {
  readonly replies: boolean;
  readonly threads: boolean;
  /**
   * Where a send into thread `threadId` under channel `channelId` goes, checked now: the channel to
   * send in (Discord: the thread's own channel) and the message it answers (Slack: the thread's
   * parent `ts`); or why not (a sentence, e.g. the thread is under another channel).
   */
  inThread?(channelId: string, threadId: string, signal: AbortSignal): Promise<{ channelId: string; replyTo?: string } | { refused: string }>;
}

/** Deleting a message Herald sent. */
export interface Deleter {
  /** Delete it; a message already gone is success (idempotent), so a retry after a lost answer is delivered. */
  delete(channelId: string, messageId: string, signal: AbortSignal): Promise<void>;
}

export interface History {
  /** Herald's own user on the platform (the author of what it sends). */
  selfId(): Promise<string>;
  fingerprint(message: OutgoingMessage): string;
  /**
   * Messages created from `from` to `until`, oldest first, reading at most `max`; `complete` is
   * false when `max` ran out before `until` was passed.
   */
  listBetween(channelId: string, from: Date, until: Date, max: number, signal: AbortSignal): Promise<{ messages: SeenMessage[]; complete: boolean }>;
}


/**
 * What platforms reported of Herald's own sends (Discord's gateway nonces, IRC's labeled echoes):
 * which message a send key created, and which key created a message.
 */
export interface NonceLedger {
  /** Undefined: not reported. */
  find(key: string): Promise<SentMessage | undefined>;
  /** The keys reported for these messages (message id → key). */
  noncesOf(messageIds: readonly string[]): Promise<Map<string, string>>;
}

/**
 * Proof of a send by its key, where the platform keeps the key with the message (Slack's message
 * metadata): "find what this key created", exactly, at any age, with no content matching.
 */
export interface KeyedHistory {
  /**
   * The message `key` created in `channelId` between `from` and `until`: found; absent only after
   * a complete read of that span; undecided (with Herald's words why) when the platform cannot say.
   * `thread`: the send went into that thread (the message's `replyTo`), whose replies the channel's
   * own history may not list (Slack's conversations.history shows only a thread's parent).
   */
  findByKey(channelId: string, key: string, from: Date, until: Date, signal: AbortSignal, thread?: string): Promise<KeyedFind>;
}

export type KeyedFind = { found: SentMessage } | { absent: true } | { undecided: string };

export interface Channels {
  /** Undefined when the channel does not exist or the bot cannot see it. */
  getChannel(channelId: string): Promise<ChannelInfo | undefined>;
  /** Why `channel` cannot name a channel here (a sentence for a 400), before any lookup; absent: no check. */
  check?(channel: string): string | undefined;
}

export interface Members {
  listMembers(channelId: string): Promise<MemberInfo[]>;
}

export interface Inbound {
  /** Messages others write where Herald can see them; returns the unsubscribe. */
  onMessage(listener: (message: InboundMessage) => void): () => void;
  /** Reading back what the live stream may have missed; absent: the platform cannot catch up. */
  readonly recent?: InboundHistory;
  /** Reactions others add where Herald can see them; returns the unsubscribe. Absent: not reported. */
  onReaction?(listener: (reaction: InboundReaction) => void): () => void;
}

/**
 * The recent messages others wrote where Herald can see them, read from the platform's history
 * (Discord: its text channels and active threads), for catching up on what the live stream missed.
 */
export interface InboundHistory {
  /** Whether this process holds the live stream now (its session is ready): catching up is its job. */
  held(): boolean;
  /** Called each time this process starts holding the live stream; returns the unsubscribe. */
  onHeld(listener: () => void): () => void;
  /** The channels (and active threads) where messages can reach Herald now. */
  channels(signal: AbortSignal): Promise<string[]>;
  /**
   * One page of the messages in `channelId` after message `afterId` (exclusive) and after `from`,
   * whichever is later: those others wrote, oldest first; `last` is the newest message the page
   * read (Herald's own included), to read on after; `complete` when no more follow it now.
   */
  since(channelId: string, afterId: string | undefined, from: Date, signal: AbortSignal): Promise<{ messages: InboundMessage[]; last: string | undefined; complete: boolean }>;
}

/** A chat line as the chat tools read it. */
export interface ChatLine {
  nick: string;
  text: string;
  at: Date;
}

/** What a chat send left on the platform. */
export interface ChatSent {
  /** Platform message ids, one per line the text was split into, in order. */
  messageIds: string[];
  /**
   * False when the platform gave no proof that it took every line (an IRC server without
   * labeled-response/echo-message): the send is unconfirmed, never reported delivered.
   */
  confirmed: boolean;
}

/** What a chat send shows, for finding it again on the platform. */
export interface ChatSendProof {
  text: string;
  sender: string;
  /** No part of it was created before this time. */
  since: Date;
  /**
   * Message ids other sends are known to have created (their own proof), never counted as this
   * send's even when they show the same text.
   */
  taken(messageIds: readonly string[]): Promise<Set<string>>;
  /**
   * Whether another unsettled send shows the same text in the same channel: a matching message
   * may be its, so a match is no proof.
   */
  twins(): Promise<boolean>;
}

/**
 * The five chat tools on one platform: send under a sender's name, read, create and
 * list channels, list members. A channel is named as people know it (`#ops` on IRC, `ops` on Discord).
 */
export interface Chat {
  /**
   * Send `text` as `sender`, split to the platform's line length. `key` marks every line, the
   * same on every attempt; `alreadySent` holds the parts an earlier attempt got out (by index),
   * which are not sent again. A failure after a part of this call went out says `mayHaveCreated`.
   */
  send(channel: string, text: string, sender: string, key: string, alreadySent: ReadonlyMap<number, string>, signal: AbortSignal, deadline?: SendDeadline): Promise<ChatSent>;
  /**
   * The proof half of the chat facet: the parts of send `key` already in the channel (index →
   * message id), for a retry or a re-drive after a crash; undefined when the platform cannot tell.
   * `sent` says what the send shows and since when it may have been created (a platform that
   * proves by its history looks for it there).
   */
  sentParts(channel: string, key: string, signal: AbortSignal, sent: ChatSendProof): Promise<Map<number, string> | undefined>;
  /** Newest first; `since` exclusive. */
  read(channel: string, since: Date | undefined, limit: number): Promise<ChatLine[]>;
  /** Create (or join) a channel; returns its name as the platform shows it. */
  createChannel(name: string): Promise<string>;
  listChannels(): Promise<string[]>;
  /** Who is in the channel, by display name; Herald's own observer is never listed. */
  members(channel: string): Promise<string[]>;
  /** Whether `sender` is a name this platform can send under (an IRC nick), and why not. */
  checkSender(sender: string): string | undefined;
  /** Whether `channel` can name a channel here, and why not. */
  checkChannel(channel: string): string | undefined;
  /** Whether `text` can be sent here as it is, and why not (IRC: no control characters but formatting). */
  checkText(text: string): string | undefined;
  /**
   * Each sender's lines go out on a connection of its own, paced there in the order sent (IRC):
   * the outbox then shares its slots fairly among senders (src/outbox/lanes.ts).
   */
  readonly pacedBySender?: boolean;
}

export type { CommandDefinition, CommandHandler, CommandInvocation, CommandInvoker, CommandOption, FetchedMessage, Invokers } from './commands.js';

/**
 * A chat platform Herald speaks to, as small facets: a platform implements only the facets it can
 * (IRC has no edits; a platform without history cannot be reconciled against), and everything
 * Herald offers on it (the protocol's capabilities, the MCP tools) is computed from which are present.
 */
export interface Platform {
  readonly name: TransportName;
  readonly sender?: Sender;
  readonly dms?: DirectMessages;
  readonly editor?: Editor;
  readonly history?: History;
  /** Finding a send by its key in the channel (preferred over `history` when present). */
  readonly keyed?: KeyedHistory;
  /** History with its media, page by page (the media archive). */
  readonly pages?: HistoryPages;
  readonly channels?: Channels;
  readonly members?: Members;
  readonly inbound?: Inbound;
  readonly invokers?: Invokers;
  readonly chat?: Chat;
  /** Adding and removing Herald's reactions. */
  readonly reactions?: Reactions;
  /** Deleting Herald's messages. */
  readonly deleter?: Deleter;
  /** Replies and threads on a send; absent: neither. */
  readonly threading?: Threading;
  /** Whether `sender` honours idempotency keys (Discord's nonce). */
  readonly idempotentSend: boolean;
  /** Files a sent message may carry; absent: the platform's sends carry none. */
  readonly files?: FileLimits;
  /**
   * How Herald's sentences name the platform (`Discord`, `Slack`: "a create may have reached
   * Discord"); absent: its name.
   */
  readonly title?: string;
  /**
   * Where people open a message it sent (`scope`: the guild id, or `@me` for a DM): the delivered
   * state's `url`, which the contract requires.
   */
  messageUrl(scope: string, channelId: string, messageId: string): string;
  /**
   * Where a person opens the message `url` names, when it is one of this platform's links (in
   * sandbox mode, `linkBase` is the sandbox's origin); absent or undefined: nowhere but the url.
   */
  messageLink?(url: string, linkBase: string | undefined): string | undefined;
}

/** The platforms this process speaks, by name. `home` holds users' identities: DMs go there. */
export interface Platforms {
  readonly home: Platform;
  /** Every platform, home first. */
  readonly all: readonly Platform[];
  get(name: TransportName): Platform | undefined;
  /**
   * The same platforms spoken as `identity` (src/infra/policy/identity.ts; `default` is these):
   * each platform as that identity, and none where it has no identity of that name, so nothing
   * is ever sent as another. Undefined when no platform has it.
   */
  as(identity: string): Platforms | undefined;
  /** The identities some platform has besides `default`, by name (none: one bot each). */
  readonly identities: readonly string[];
}

/** Several platforms; the first is home. */
export function platformsOf(home: Platform, ...others: Platform[]): Platforms {
  return speakingAs(home, others, new Map());
}

/** Several platforms (home first) and `identities`: each platform's other identities, by platform name (RunningPlatform.identities). */
export function speakingAs(home: Platform, others: readonly Platform[], identities: ReadonlyMap<string, ReadonlyMap<string, Platform>>): Platforms {
  const all = [home, ...others];
  const byName = new Map(all.map((t) => [t.name, t]));
  const views = new Map<string, Platforms>();
  const names = [...new Set([...identities.values()].flatMap((m) => [...m.keys()]))];
  const self: Platforms = {
    home,
    all,
    identities: names,
    get: (name) => byName.get(name),
    as(identity) {
      if (identity === DEFAULT_IDENTITY) return self;
      const found = views.get(identity);
      if (found !== undefined) return found;
      const spoken = all.flatMap((p) => identities.get(p.name)?.get(identity) ?? []);
      if (spoken.length === 0) return undefined;
      const mine = new Map(spoken.map((p) => [p.name, p]));
      // Home stays the platform people's DMs go to (its name); where the identity lacks it, a
      // platform of that name with no facet at all: nothing can be sent through it as another bot.
      const bare: Platform = { name: home.name, ...(home.title !== undefined ? { title: home.title } : {}), idempotentSend: false, messageUrl: (scope, channelId, messageId) => home.messageUrl(scope, channelId, messageId) };
      const view: Platforms = { home: mine.get(home.name) ?? bare, all: spoken, get: (name) => mine.get(name), as: (other) => (other === identity ? view : self.as(other)), identities: names };
      views.set(identity, view);
      return view;
    },
  };
  return self;
}

/** What a transport can do, from which facets it has: the one record capabilities are computed from. */
export interface TransportCapabilities {
  send: boolean;
  idempotentSend: boolean;
  dm: boolean;
  edit: boolean;
  history: boolean;
  channels: boolean;
  members: boolean;
  inbound: boolean;
  chat: boolean;
  /** The `reaction` kind. */
  reactions: boolean;
  /** The `delete` kind. */
  deletes: boolean;
  /** A post or DM may carry `reply_to`. */
  replies: boolean;
  /** A post may carry `thread`. */
  threads: boolean;
  /** Attachments on a post or DM: a platform whose sends carry files says so by its `files` facet (their limits). */
  files: boolean;
}

export function capabilitiesOf(t: Platform): TransportCapabilities {
  return {
    send: t.sender !== undefined,
    idempotentSend: t.sender !== undefined && t.idempotentSend,
    dm: t.sender !== undefined && t.dms !== undefined,
    edit: t.editor !== undefined,
    history: t.history !== undefined || t.keyed !== undefined,
    channels: t.channels !== undefined,
    members: t.members !== undefined,
    inbound: t.inbound !== undefined,
    chat: t.chat !== undefined,
    reactions: t.reactions !== undefined,
    deletes: t.deleter !== undefined,
    replies: t.sender !== undefined && t.threading?.replies === true,
    threads: t.sender !== undefined && t.threading?.threads === true,
    files: t.sender !== undefined && t.files !== undefined,
  };
}
