import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { SnowflakeGenerator } from '../snowflake.js';
import type { GatewayGuild } from './gateway.js';
import { SANDBOX_IDS } from './ids.js';
import type { SandboxAttachment } from './attachments.js';

/**
 * The sandbox's Discord world: users (the bot among them), guilds, channels, the messages in
 * them, the nonces of recent messages, the application's registered commands, and the snowflake
 * ids all of them get. The REST routes, the gateway and the control API read and change it.
 */

/** A channel's permission overwrite, as Discord shapes it. */
export interface SandboxOverwrite {
  id: string;
  /** 0 role, 1 member. */
  type: 0 | 1;
  allow: string;
  deny: string;
}

export interface SandboxUser {
  id: string;
  username: string;
  global_name: string | null;
  bot?: boolean;
  /** The user does not accept DMs from the bot (Discord error 50007). */
  dms_closed?: boolean;
}
export interface SandboxChannel {
  id: string;
  type: number;
  name?: string;
  guild_id?: string;
  recipients?: SandboxUser[];
  /** Role and member permission overwrites (guild channels). */
  permission_overwrites?: SandboxOverwrite[];
  /** A thread's channel (type 11, a public thread). */
  parent_id?: string;
  /**
   * A DM channel's bot, where it is not Herald's own (the sandbox's record: Discord's channel object
   * does not carry it, and no route sends it). As on Discord, each bot has its own DM channel with a
   * person, and no other bot may read or write there.
   */
  dm_bot?: string;
}
export interface SandboxMessage {
  id: string;
  channel_id: string;
  author: SandboxUser;
  content: string;
  embeds: unknown[];
  components: unknown[];
  timestamp: string;
  edited_timestamp: string | null;
  /** Discord's message type: 0 a message someone wrote; others are system messages (7 a member joined, 6 a pin, …). */
  type: number;
  /** Kept for inspection; Discord does not list it either (only the create response has it). */
  nonce?: string | number;
  allowed_mentions?: unknown;
  edits: number;
  /** Files sent with it, in Discord's shape (served by the sandbox's CDN route). */
  attachments?: SandboxAttachment[];
  /** A reply's target (Discord's message_reference), when a person replied to a message. */
  message_reference?: { message_id: string; channel_id: string; guild_id?: string };
  /** Reactions, in the order first added: the emoji (unicode, or `name:id`) and who reacted. */
  reactions?: SandboxReaction[];
}
export interface SandboxReaction {
  emoji: string;
  users: string[];
}
/** A message that was deleted: gone from its channel (Discord answers Unknown Message), kept here for the page and the control API's truth. */
export interface DeletedMessage {
  id: string;
  channel_id: string;
  author_id: string;
  deleted_at: string;
  /** Who deleted it. */
  deleted_by: string;
}
export interface SandboxGuild {
  id: string;
  name: string;
}

/** A slash command as the bot registered it (with the ids Discord gave it). */
export interface RegisteredCommand {
  id: string;
  name: string;
  options?: { type: number; name: string; options?: { type: number; name: string }[] }[];
  [key: string]: unknown;
}

export interface StateOptions {
  /** Window of `enforce_nonce` deduplication. */
  nonceWindowMs: number;
  /** Seed the sandbox guild, its channels and a user. */
  seed: boolean;
  /**
   * Keep the world (guilds, channels, users, messages, recent nonces) in this JSON file, so a
   * restart shows what was delivered before it. Absent: in memory only (tests).
   */
  file?: string | undefined;
}

/** What the state file holds. Registered commands are not kept: the bot registers them at start. */
interface SavedWorld {
  version: 1;
  guilds: SandboxGuild[];
  channels: SandboxChannel[];
  users: SandboxUser[];
  messages: SandboxMessage[];
  nonces: [string, { messageId: string; at: number }][];
  /** Messages deleted (absent in a world saved before deletes). */
  deleted?: DeletedMessage[];
}

export class SandboxState {
  readonly bot: SandboxUser = { id: '111111111111111111', username: 'herald', global_name: 'Herald', bot: true };
  readonly users = new Map<string, SandboxUser>();
  readonly guilds = new Map<string, SandboxGuild>();
  readonly channels = new Map<string, SandboxChannel>();
  readonly messages = new Map<string, SandboxMessage[]>();
  readonly commands: RegisteredCommand[] = [];
  /** Other bots' registered commands, by application id (a bot's application id is its user id). */
  readonly otherCommands = new Map<string, RegisteredCommand[]>();
  /** Deleted messages, oldest deletion first. */
  readonly deleted: DeletedMessage[] = [];
  private readonly nonces = new Map<string, { messageId: string; at: number }>();
  private readonly snowflakes = new SnowflakeGenerator();

  constructor(private readonly options: StateOptions) {
    this.users.set(this.bot.id, this.bot);
    if (!this.load() && options.seed) this.seed();
  }

  /** The world as the state file last kept it; false when there is no file yet. */
  private load(): boolean {
    const file = this.options.file;
    if (file === undefined) return false;
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
    let saved: SavedWorld;
    try {
      saved = JSON.parse(text) as SavedWorld;
    } catch {
      throw new Error(`${file} is not the sandbox's saved world (not JSON); move it aside or delete it to start an empty sandbox`);
    }
    if (saved.version !== 1) throw new Error(`${file}: unknown sandbox state version; move it aside or delete it to start an empty sandbox`);
    for (const g of saved.guilds) this.addGuild(g.id, g.name);
    for (const u of saved.users) if (u.id !== this.bot.id) this.addUser(u);
    // A DM channel's recipient is the user itself (its dms_closed flag included), not a copy.
    for (const c of saved.channels) this.addChannel(c.recipients === undefined ? c : { ...c, recipients: c.recipients.map((u) => this.users.get(u.id) ?? u) });
    for (const m of saved.messages) this.messages.get(m.channel_id)?.push({ ...m, author: m.author.id === this.bot.id ? this.bot : m.author });
    for (const [key, entry] of saved.nonces) this.nonces.set(key, entry);
    this.deleted.push(...(saved.deleted ?? []));
    return true;
  }

  /**
   * Write the world to the state file, if there is one: to a temporary file, then renamed over
   * the old one, so a crash leaves either the old or the new world, never half of one. Called
   * after each change and before the change is answered, so what Discord said it created is kept.
   */
  save(): void {
    const file = this.options.file;
    if (file === undefined) return;
    const world: SavedWorld = {
      version: 1,
      guilds: [...this.guilds.values()],
      channels: [...this.channels.values()],
      users: [...this.users.values()].filter((u) => u.id !== this.bot.id),
      messages: this.allMessages(),
      nonces: [...this.nonces.entries()].filter(([, e]) => Date.now() - e.at <= this.options.nonceWindowMs),
      deleted: this.deleted,
    };
    mkdirSync(path.dirname(file), { recursive: true });
    const temp = `${file}.${process.pid}.tmp`;
    // It holds message content: readable by its owner only, like the tokens beside it.
    writeFileSync(temp, JSON.stringify(world), { mode: 0o600 });
    renameSync(temp, file);
  }

  /** The bot's application id (as on Discord, the bot user's id). */
  get applicationId(): string {
    return this.bot.id;
  }

  /** A new id, later than every id given before. */
  nextSnowflake(): string {
    return this.snowflakes.next();
  }

  private seed(): void {
    this.addGuild(SANDBOX_IDS.guild, 'Sandbox Guild');
    for (const [name, id] of Object.entries(SANDBOX_IDS.channels)) this.addChannel({ id, type: 0, name, guild_id: SANDBOX_IDS.guild });
    this.addChannel({ id: SANDBOX_IDS.voiceChannel, type: 2, name: 'voice', guild_id: SANDBOX_IDS.guild });
    this.addGuild(SANDBOX_IDS.otherGuild, 'Another Guild');
    this.addChannel({ id: SANDBOX_IDS.otherChannel, type: 0, name: 'general', guild_id: SANDBOX_IDS.otherGuild });
    this.addUser({ id: SANDBOX_IDS.user, username: 'roshne', global_name: 'Roshne' });
  }

  addGuild(id: string, name: string): void {
    this.guilds.set(id, { id, name });
  }
  addChannel(channel: SandboxChannel): void {
    this.channels.set(channel.id, channel);
    if (!this.messages.has(channel.id)) this.messages.set(channel.id, []);
  }
  addUser(user: SandboxUser): void {
    this.users.set(user.id, user);
  }

  /** The bot's DM channel with a user, opened if it is not yet. */
  /** A person's DM channel with a bot (Herald's own by default), opened if needed. */
  dmChannel(recipient: SandboxUser, botId = this.bot.id): SandboxChannel {
    let channel = [...this.channels.values()].find((c) => c.type === 1 && c.recipients?.[0]?.id === recipient.id && this.dmBotOf(c) === botId);
    if (channel === undefined) {
      channel = { id: this.nextSnowflake(), type: 1, recipients: [recipient], ...(botId !== this.bot.id ? { dm_bot: botId } : {}) };
      this.addChannel(channel);
      this.save();
    }
    return channel;
  }

  /** The bot a DM channel is with (undefined: not a DM channel). */
  dmBotOf(channel: SandboxChannel): string | undefined {
    return channel.type === 1 ? (channel.dm_bot ?? this.bot.id) : undefined;
  }

  /** The guilds with their channels and threads, as the gateway announces them. */
  gatewayGuilds(): GatewayGuild[] {
    return [...this.guilds.values()].map((g) => {
      const inGuild = [...this.channels.values()].filter((c) => c.guild_id === g.id);
      return { ...g, channels: inGuild.filter((c) => c.type !== THREAD_TYPE), threads: inGuild.filter((c) => c.type === THREAD_TYPE) };
    });
  }

  /** Every message in a channel, oldest first. */
  channelMessages(channelId: string): SandboxMessage[] {
    return [...(this.messages.get(channelId) ?? [])];
  }
  allMessages(): SandboxMessage[] {
    return [...this.messages.values()].flat();
  }

  addMessage(message: SandboxMessage): void {
    this.messages.get(message.channel_id)?.push(message);
  }

  /** The message a bot (by default Herald's) created in this channel with this enforced nonce within the nonce window, if any. */
  messageWithNonce(channelId: string, nonce: string | number, authorId = this.bot.id): SandboxMessage | undefined {
    const existing = this.nonces.get(this.nonceKey(channelId, nonce, authorId));
    if (existing === undefined || Date.now() - existing.at > this.options.nonceWindowMs) return undefined;
    return this.channelMessages(channelId).find((m) => m.id === existing.messageId);
  }
  /** Remember a message a bot created with an enforced nonce (nonces are per author, as on Discord). */
  rememberNonce(channelId: string, nonce: string | number, messageId: string, authorId = this.bot.id): void {
    this.nonces.set(this.nonceKey(channelId, nonce, authorId), { messageId, at: Date.now() });
  }

  /** Take a message out of its channel (a DELETE), keeping the record of it; false: no such message. */
  deleteMessage(channelId: string, messageId: string, by: string): boolean {
    const list = this.messages.get(channelId);
    const index = list?.findIndex((m) => m.id === messageId) ?? -1;
    const message = index >= 0 ? list?.[index] : undefined;
    if (list === undefined || message === undefined) return false;
    list.splice(index, 1);
    this.deleted.push({ id: message.id, channel_id: channelId, author_id: message.author.id, deleted_at: new Date().toISOString(), deleted_by: by });
    return true;
  }

  /** The message with this id in this channel, if any. */
  findMessage(channelId: string, messageId: string): SandboxMessage | undefined {
    return this.messages.get(channelId)?.find((m) => m.id === messageId);
  }
  private nonceKey(channelId: string, nonce: string | number, authorId: string): string {
    return `${channelId}:${authorId}:${String(nonce)}`;
  }
}

/** Discord's public thread channel type. */
export const THREAD_TYPE = 11;

/**
 * Who a message mentions, as Discord computes it: users named in the content (`<@id>`) that its
 * `allowed_mentions` lets through (absent: all of them, Discord's default), and whether
 * `@everyone` counts. A bot receives a message's content over the gateway only if it is the
 * author or mentioned (no Message Content intent).
 */
export function mentionsOf(m: Pick<SandboxMessage, 'content' | 'allowed_mentions'>): { users: string[]; everyone: boolean } {
  const named = [...m.content.matchAll(/<@!?([0-9]{17,20})>/g)].map((x) => x[1] ?? '');
  const allowed = (m.allowed_mentions ?? { parse: ['users', 'roles', 'everyone'] }) as { parse?: unknown; users?: unknown };
  const parse = Array.isArray(allowed.parse) ? (allowed.parse as unknown[]) : [];
  const listed = Array.isArray(allowed.users) ? (allowed.users as unknown[]).map(String) : [];
  const users = [...new Set(named.filter((id) => parse.includes('users') || listed.includes(id)))];
  return { users, everyone: parse.includes('everyone') && /@(everyone|here)/.test(m.content) };
}

/** A user as Discord shows it to others. */
export function publicUser(u: SandboxUser): Record<string, unknown> {
  return { id: u.id, username: u.username, global_name: u.global_name, discriminator: '0', avatar: null, ...(u.bot ? { bot: true } : {}) };
}
