import { createHash } from 'node:crypto';
import { ChannelType, Routes, type APIChannel, type APIGuildMember, type APIMessage, type REST } from 'discord.js';
import { splitForIrc } from '../irc/split.js';
import { TransportError, type Chat, type ChatLine, type ChatSendProof, type History, type NonceLedger, type SendDeadline, type SentMessage } from '../platform.js';
import { partway } from '../partway.js';
import { snowflakeAt } from './snowflake.js';
import { outsideFences } from '../../infra/faults/fence.js';

/** Discord's limit is 2000 characters; the `**sender**: ` prefix takes some of it. */
const PART_BYTES = 1_800;
/** How an agent's line shows on Discord, and how reading finds the agent again. */
const SIGNED = /^\*\*([^*\n]{1,32})\*\*: ([\s\S]*)$/;
/** How far before a send's start its parts are looked for: clock skew between Herald and Discord. */
const PROOF_SKEW_MS = 10_000;
/** How many channel messages a proof reads at most. */
const PROOF_MAX_MESSAGES = 1000;
/**
 * How long the guild's channel list is reused to turn a name into an id: every chat send and proof
 * needs it, and one route's budget (`GET /guilds/{id}/channels`) would otherwise pace every line. A
 * name not in a list read earlier is looked up again at once (a channel created since).
 */
const CHANNELS_FRESH_MS = 30_000;


export interface DiscordChatOptions {
  rest: REST;
  /** `HERALD_DISCORD_CHAT_GUILD`; undefined: the bot's only guild. */
  guildId: string | undefined;
  selfId(): Promise<string>;
  /** Create a message with a nonce (`enforce_nonce`): the transport's own sender. */
  send(channelId: string, content: string, nonce: string, signal: AbortSignal, deadline?: SendDeadline): Promise<SentMessage>;
  /** The channel's history, where a part is found again past the nonce window. */
  history: History;
  /** The gateway's nonce reports; undefined (none yet): history alone proves. */
  ledger(): NonceLedger | undefined;
  call<T>(fn: () => Promise<T>): Promise<T>;
}

/**
 * The chat tools on Discord: channels of one guild by name (or id), history, members, creating a
 * text channel (the bot needs Manage Channels). Discord has one author, the bot: an agent's line is
 * posted as `**sender**: text`, and read back under the sender's name. Each part is created with a
 * nonce derived from the send and part, so a resend inside Discord's nonce window returns the
 * message already created.
 */
export class DiscordChat implements Chat {
  private guild: Promise<string> | undefined;
  private channels: { at: number; list: Promise<APIChannel[]> } | undefined;

  constructor(private readonly o: DiscordChatOptions) {}

  checkSender(sender: string): string | undefined {
    return /^[^\s*][^\n*]{0,31}$/.test(sender) ? undefined : 'sender must be 1..32 characters, without line breaks or *';
  }

  checkChannel(channel: string): string | undefined {
    return /^#?[^\s#]{1,100}$/.test(channel) ? undefined : 'channel must be a Discord channel name or id';
  }

  /** Any text: Discord shows control characters as they are and acts on none of them. */
  checkText(): string | undefined {
    return undefined;
  }

  private guildId(): Promise<string> {
    this.guild ??= (async () => {
      if (this.o.guildId !== undefined) return this.o.guildId;
      // Shared by every caller: asked under no job's fence (src/infra/faults/fence.ts).
      const guilds = (await outsideFences(() => this.o.call(() => this.o.rest.get(Routes.userGuilds())))) as { id: string }[];
      const [only] = guilds;
      if (guilds.length !== 1 || only === undefined) throw new TransportError({ kind: 'rejected', detail: `the bot is in ${guilds.length} servers: set HERALD_DISCORD_CHAT_GUILD` });
      return only.id;
    })();
    this.guild.catch(() => (this.guild = undefined));
    return this.guild;
  }

  /** The guild's text channels: read now, or as read in the last CHANNELS_FRESH_MS when `reuse`. */
  private async textChannels(reuse = false): Promise<APIChannel[]> {
    const cached = this.channels;
    if (reuse && cached !== undefined && Date.now() - cached.at < CHANNELS_FRESH_MS) return cached.list;
    const list = (async () => {
      const guildId = await this.guildId();
      const all = (await this.o.call(() => this.o.rest.get(Routes.guildChannels(guildId)))) as APIChannel[];
      return all.filter((c) => c.type === ChannelType.GuildText || c.type === ChannelType.GuildAnnouncement);
    })();
    const entry = { at: Date.now(), list };
    this.channels = entry;
    // A failed read is not kept.
    list.catch(() => {
      if (this.channels === entry) this.channels = undefined;
    });
    return list;
  }

  private async channelId(channel: string): Promise<string> {
    const bare = channel.replace(/^#/, '');
    const named = (c: APIChannel) => c.id === bare || ('name' in c && c.name === bare.toLowerCase());
    // The list read lately first; a name not in it is looked up afresh (created, or renamed, since).
    const found = (await this.textChannels(true)).find(named) ?? (await this.textChannels()).find(named);
    if (found === undefined) throw new TransportError({ kind: 'not_found', detail: `no text channel ${bare} in the chat server` });
    return found.id;
  }

  async send(channel: string, text: string, sender: string, key: string, alreadySent: ReadonlyMap<number, string>, signal: AbortSignal, deadline?: SendDeadline): Promise<{ messageIds: string[]; confirmed: boolean }> {
    const channelId = await this.channelId(channel);
    const parts = partsOf(text, sender);
    const ids: string[] = [];
    for (const [i, part] of parts.entries()) {
      const earlier = alreadySent.get(i);
      if (earlier !== undefined) {
        ids.push(earlier);
        continue;
      }
      ids.push((await this.o.send(channelId, part, partNonce(key, i), signal, deadline).catch((err: unknown) => partway(err, ids.some((_, j) => !alreadySent.has(j))))).messageId);
    }
    return { messageIds: ids, confirmed: true };
  }

  /**
   * The parts of an earlier attempt already in the channel, as a post is proven: the nonce the
   * gateway reported for a part settles it; otherwise the channel's history since the send began,
   * by the bot, showing the part's text, and neither reported under another nonce nor known as
   * another send's. Two candidates for one part cannot be told apart: undefined, never a guess.
   */
  async sentParts(channel: string, key: string, signal: AbortSignal, sent: ChatSendProof): Promise<Map<number, string> | undefined> {
    const channelId = await this.channelId(channel);
    const parts = partsOf(sent.text, sent.sender);
    const found = new Map<number, string>();
    const missing: number[] = [];
    for (const i of parts.keys()) {
      const reported = await this.o.ledger()?.find(partNonce(key, i));
      if (reported !== undefined) found.set(i, reported.messageId);
      else missing.push(i);
    }
    if (missing.length === 0) return found;
    const self = await this.o.history.selfId();
    const seen = await this.o.history.listBetween(channelId, new Date(sent.since.getTime() - PROOF_SKEW_MS), new Date(Date.now() + PROOF_SKEW_MS), PROOF_MAX_MESSAGES, signal);
    if (!seen.complete) return undefined;
    const mine = seen.messages.filter((m) => m.authorId === self && !new Set(found.values()).has(m.messageId));
    const ids = mine.map((m) => m.messageId);
    const taken = await sent.taken(ids);
    const nonces = (await this.o.ledger()?.noncesOf(ids)) ?? new Map<string, string>();
    // Looked up after what is recorded, so a twin recording in between still counts as a twin.
    const twins = await sent.twins();
    for (const i of missing) {
      const part = parts[i] ?? '';
      const fingerprint = this.o.history.fingerprint({ content: part });
      const nonce = partNonce(key, i);
      const candidates = mine.filter((m) => m.fingerprint === fingerprint && !taken.has(m.messageId) && (nonces.get(m.messageId) ?? nonce) === nonce);
      // The same text twice in one send: parts go out in order, so the oldest candidates are the
      // earliest such parts. More candidates than parts cannot be told apart.
      const alike = missing.filter((j) => parts[j] === part);
      if (candidates.length > alike.length || (candidates.length > 0 && twins)) return undefined;
      const rank = alike.indexOf(i);
      const match = candidates[rank];
      if (match !== undefined) found.set(i, match.messageId);
    }
    return found;
  }

  async read(channel: string, since: Date | undefined, limit: number): Promise<ChatLine[]> {
    const channelId = await this.channelId(channel);
    const query = new URLSearchParams({ limit: String(Math.min(100, limit)) });
    const page = (await this.o.call(() => this.o.rest.get(Routes.channelMessages(channelId), { query }))) as APIMessage[];
    const self = await this.o.selfId();
    const sinceId = since === undefined ? undefined : BigInt(snowflakeAt(since));
    return page
      .filter((m) => sinceId === undefined || BigInt(m.id) > sinceId)
      .map((m) => {
        const signed = m.author.id === self ? SIGNED.exec(m.content) : null;
        return signed !== null ? { nick: signed[1] ?? '', text: signed[2] ?? '', at: new Date(m.timestamp) } : { nick: m.author.global_name ?? m.author.username, text: m.content, at: new Date(m.timestamp) };
      });
  }

  /**
   * One create at a time in this process: two at once both found no channel of the name and made
   * two (Discord allows twins), where the same name again must answer the one that exists.
   */
  async createChannel(name: string): Promise<string> {
    const turn = this.creating.then(() => this.createOne(name));
    this.creating = turn.catch(() => undefined);
    return turn;
  }

  private creating: Promise<unknown> = Promise.resolve();

  private async createOne(name: string): Promise<string> {
    const bare = name.replace(/^#/, '').toLowerCase();
    const existing = (await this.textChannels()).find((c) => 'name' in c && c.name === bare);
    if (existing !== undefined && 'name' in existing && existing.name !== null) return existing.name;
    const guildId = await this.guildId();
    try {
      const created = (await this.o.call(() => this.o.rest.post(Routes.guildChannels(guildId), { body: { name: bare, type: ChannelType.GuildText } }))) as APIChannel;
      return 'name' in created && created.name !== null ? created.name : bare;
    } catch (err) {
      if (err instanceof TransportError && err.failure.kind === 'rejected') {
        throw new TransportError({ kind: 'rejected', detail: `Discord refused to create the channel (the bot needs Manage Channels): ${err.failure.detail}` });
      }
      throw err;
    }
  }

  async listChannels(): Promise<string[]> {
    return (await this.textChannels()).flatMap((c) => ('name' in c && c.name !== null ? [c.name] : [])).sort();
  }

  async members(channel: string): Promise<string[]> {
    await this.channelId(channel);
    const guildId = await this.guildId();
    const query = new URLSearchParams({ limit: '1000' });
    const all = (await this.o.call(() => this.o.rest.get(Routes.guildMembers(guildId), { query }))) as APIGuildMember[];
    const self = await this.o.selfId();
    return all.flatMap((m) => (m.user.id === self ? [] : [m.nick ?? m.user.global_name ?? m.user.username])).sort((a, b) => a.localeCompare(b));
  }
}

/** The messages a chat text becomes on Discord: each part signed `**sender**: `. */
function partsOf(text: string, sender: string): string[] {
  return splitForIrc(text, PART_BYTES).map((part) => `**${sender}**: ${part}`);
}

/** Part `i` of send `key`'s nonce (Discord allows 25 characters). */
function partNonce(key: string, i: number): string {
  return createHash('sha256').update(`herald-chat:${key}:${i}`).digest('base64url').slice(0, 25);
}
