import { randomBytes } from 'node:crypto';
import type { components } from '../../../generated/api.js';
import type { Clock } from '../../infra/clock.js';
import { ConflictError, InvalidRequestError, NotFoundError, UpstreamError } from '../../infra/errors.js';
import { TransportError, type Chat, type TransportName, type Platforms } from '../../platforms/platform.js';
import { PLATFORM_NAMES } from '../../platforms/platforms.js';
import { payloadHash, type ChatTarget, type DeliveryRow, type DeliveryService } from '../deliveries/index.js';
import { chatIdOf, chatRequestId } from './chat.kind.js';

type Schemas = components['schemas'];
export type ChatSendView = Schemas['ChatSend'];
export type ChatMessagesView = Schemas['ChatMessages'];
/** A platform as the contract names it in chat answers (any platform name; test/platform-list.test.ts). */
type ChatPlatform = ChatSendView['transport'];
/** The platform the chat tools were first written for, listed first where they name the platforms. */
const FIRST_LISTED = 'irc';

export interface ChatSendInput {
  channel: string;
  text: string;
  sender: string;
  transport?: TransportName | undefined;
  request_id?: string | undefined;
}

const DEFAULT_LIMIT = 50;

/**
 * The five chat tools over any transport with a chat facet: a send is a row of the
 * deliveries outbox, kind `chat` (sent exactly once by its send kind, chat.kind.ts); reads,
 * channels and members ask the platform.
 */
export class ChatService {
  constructor(
    private readonly deliveries: DeliveryService,
    private readonly transports: Platforms,
    /** `HERALD_CHAT_TRANSPORT`: the platform a call without `transport` means. */
    private readonly defaultTransport: TransportName,
    private readonly clock: Clock,
  ) {}

  private platform(name: TransportName | undefined): { name: ChatPlatform; chat: Chat } {
    // A name of no platform Herald knows is refused with the names it knows (the contract checks only its shape).
    if (name !== undefined && !this.known().includes(name)) throw new InvalidRequestError(`transport must be one of ${this.known().join(', ')}`);
    const chosen = name ?? this.defaultTransport;
    // Any configured platform with a chat facet.
    const chat = this.transports.get(chosen)?.chat;
    if (chat === undefined) throw new InvalidRequestError(`transport ${chosen} is not configured for chat`);
    return { name: chosen as ChatPlatform, chat };
  }

  /**
   * Every platform Herald can speak (the registry's, and any other this process runs), IRC's first:
   * the order the chat tools have always listed them in (their contract once held the list).
   */
  private known(): string[] {
    const names = [...new Set([...PLATFORM_NAMES, ...this.transports.all.map((t) => t.name)])];
    return [...names.filter((n) => n === FIRST_LISTED), ...names.filter((n) => n !== FIRST_LISTED)];
  }

  private channelOf(chat: Chat, channel: string): string {
    const problem = chat.checkChannel(channel);
    if (problem !== undefined) throw new InvalidRequestError(problem);
    return channel;
  }

  /** Store the send (idempotent on request_id); a dispatcher sends it. */
  async send(input: ChatSendInput): Promise<ChatSendView> {
    const { name, chat } = this.platform(input.transport);
    this.channelOf(chat, input.channel);
    const senderProblem = chat.checkSender(input.sender);
    if (senderProblem !== undefined) throw new InvalidRequestError(senderProblem);
    if (input.text.trim() === '') throw new InvalidRequestError('text must not be blank');
    // Refused here, with the reason, rather than changed on the way out (IRC: a CTCP request, \x01).
    const textProblem = chat.checkText(input.text);
    if (textProblem !== undefined) throw new InvalidRequestError(textProblem);
    const id = input.request_id ?? randomBytes(16).toString('hex');
    const target: ChatTarget = { transport: name, channel: input.channel, sender: input.sender };
    const body = { content: input.text };
    const prepared = { request_id: chatRequestId(id), kind: 'chat' as const, target, body };
    let stored;
    try {
      // A repeat answers the send as it is: a failed chat send is not sent again by a re-POST.
      stored = await this.deliveries.store({ ...prepared, hash: payloadHash(prepared), supported: true, redrive: false });
    } catch (err) {
      if (err instanceof ConflictError) throw new ConflictError('request_id reused with a different payload');
      throw err;
    }
    if (stored.existing) return { ...view(stored.row), existing: true };
    return { id, transport: name, channel: input.channel, sender: input.sender, state: 'pending', existing: false };
  }

  async get(id: string): Promise<ChatSendView> {
    const row = await this.deliveries.find(chatRequestId(id));
    if (row === undefined || row.kind !== 'chat') throw new NotFoundError('not found');
    return view(row);
  }

  /** Newest first, `[at, nick, text]`; `since` is ISO 8601. */
  async read(channel: string, transport?: TransportName, since?: string, limit?: number): Promise<ChatMessagesView> {
    const { name, chat } = this.platform(transport);
    this.channelOf(chat, channel);
    let after: Date | undefined;
    if (since !== undefined) {
      after = new Date(since);
      if (!/^\d{4}-\d{2}-\d{2}/.test(since) || Number.isNaN(after.getTime())) throw new InvalidRequestError('since must be an ISO 8601 time, e.g. 2026-11-30T09:00:00Z');
    }
    const lines = await platformCall(() => chat.read(channel, after, limit ?? DEFAULT_LIMIT));
    return { transport: name, channel, messages: lines.map((l) => ({ at: l.at.toISOString(), nick: l.nick, text: l.text })) };
  }

  async createChannel(channelName: string, transport?: TransportName): Promise<{ transport: ChatPlatform; channel: string }> {
    const { name, chat } = this.platform(transport);
    this.channelOf(chat, channelName);
    return { transport: name, channel: await platformCall(() => chat.createChannel(channelName)) };
  }

  async listChannels(transport?: TransportName): Promise<{ transport: ChatPlatform; channels: string[] }> {
    const { name, chat } = this.platform(transport);
    return { transport: name, channels: await platformCall(() => chat.listChannels()) };
  }

  async members(channel: string, transport?: TransportName): Promise<{ transport: ChatPlatform; channel: string; members: string[] }> {
    const { name, chat } = this.platform(transport);
    this.channelOf(chat, channel);
    return { transport: name, channel, members: await platformCall(() => chat.members(channel)) };
  }
}

/** A platform's refusal in the API's words: refused for good → 422, not answering → 502. */
async function platformCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof TransportError)) throw err;
    if (err.failure.kind === 'transient') throw new UpstreamError(`platform unavailable: ${err.failure.detail}`);
    if (err.failure.kind === 'not_found') throw new ConflictError(`not found on the platform: ${err.failure.detail}`);
    throw new ConflictError(err.failure.detail);
  }
}

/**
 * A chat send's wire view from its outbox row; the states a chat send can reach are its own words.
 * An outbox `unknown` (in doubt, and the platform cannot tell whether it was sent) is the chat
 * state `unconfirmed`, with its reason: Herald does not send it again.
 */
function view(row: DeliveryRow): ChatSendView {
  const state = row.status === 'in_flight' ? 'pending' : row.status === 'unknown' ? 'unconfirmed' : row.status;
  const target = row.target as ChatTarget;
  const out: ChatSendView = { id: chatIdOf(row.request_id), transport: target.transport as ChatPlatform, channel: target.channel, sender: target.sender, state };
  if (row.message_ids !== null) out.message_ids = JSON.parse(row.message_ids) as string[];
  if (row.reason !== null && (state === 'failed' || state === 'unconfirmed')) out.reason = row.reason;
  return out;
}
