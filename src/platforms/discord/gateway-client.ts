import { once } from 'node:events';
import {
  Client,
  Events,
  GatewayIntentBits,
  MessageFlags,
  Options,
  Partials,
  PermissionFlagsBits,
  REST,
  Routes,
  Status,
  type APIApplication,
  type ChatInputCommandInteraction,
  type Message,
} from 'discord.js';
import type { Logger } from 'pino';
import { errorSummary } from '../../infra/errors.js';
import type { CommandDefinition, CommandHandler, CommandInvocation, HeardDetails, Inbound, InboundMessage, InboundReaction } from '../platform.js';
import { discordCommand } from './discord-commands.js';
import { AbortableIdentifyThrottler } from './identify-throttler.js';

/** How long a failed or aborted connect waits for its client to be destroyed. */
const DESTROY_WAIT_MS = 2_000;

export interface GatewayConnection {
  readonly ready: boolean;
  close(): Promise<void>;
}

/** Register slash commands with Discord for the bot's application (a bulk overwrite). */
export async function registerCommands(token: string, apiUrl: string | undefined, definitions: readonly CommandDefinition[]): Promise<string[]> {
  const rest = new REST({ version: '10', ...(apiUrl !== undefined ? { api: apiUrl } : {}) }).setToken(token);
  const app = (await rest.get(Routes.currentApplication())) as APIApplication;
  await rest.put(Routes.applicationCommands(app.id), { body: definitions.map(discordCommand) });
  return definitions.map((c) => c.name);
}

/** A slash command as Herald's command router sees it: ids and what Discord computed, no discord.js objects. */
function invocationOf(i: ChatInputCommandInteraction): CommandInvocation {
  return {
    user: { id: i.user.id, username: i.user.username, globalName: i.user.globalName },
    guildId: i.guildId,
    channelId: i.channelId,
    name: i.commandName,
    subcommand: i.options.getSubcommand(false),
    option: (name) => {
      const value = i.options.get(name)?.value;
      return value === undefined || value === null ? null : String(value);
    },
    canManageGuild: i.inGuild() && (i.memberPermissions?.has(PermissionFlagsBits.ManageGuild) ?? false),
    platform: 'discord',
  };
}

/** A message the bot created, as the gateway reports it: with the nonce it was sent with. */
export interface OwnMessage {
  nonce: string;
  channelId: string;
  messageId: string;
  createdAt: Date;
}

/**
 * The Inbound facet of Discord: messages others write where the bot can see them, as the gateway
 * reports them. Without the privileged Message Content intent, Discord sends a message's content
 * only when it mentions the bot (or is a DM): what handoffs need, and no more.
 */
export class GatewayInbound implements Inbound {
  private readonly listeners = new Set<(message: InboundMessage) => void>();

  onMessage(listener: (message: InboundMessage) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Hand a message to every listener (the gateway client calls this). */
  emit(message: InboundMessage): void {
    for (const l of this.listeners) l(message);
  }

  private readonly reactionListeners = new Set<(reaction: InboundReaction) => void>();

  onReaction(listener: (reaction: InboundReaction) => void): () => void {
    this.reactionListeners.add(listener);
    return () => this.reactionListeners.delete(listener);
  }

  /** Hand a reaction to every listener (the gateway client calls this). */
  emitReaction(reaction: InboundReaction): void {
    for (const l of this.reactionListeners) l(reaction);
  }
}

/** What the inbound inbox keeps of a message besides its content: ids, names and metadata only. */
function heardOf(message: Message): HeardDetails {
  const channel = message.channel as { isThread?: () => boolean } | null;
  return {
    authorName: message.author.globalName ?? message.author.username,
    mentions: [...message.mentions.users.keys()],
    threadId: channel?.isThread?.() === true ? message.channelId : null,
    replyTo: message.reference?.messageId ?? null,
    attachments: [...message.attachments.values()].map((a) => ({ id: a.id, filename: a.name, contentType: a.contentType, size: a.size, url: a.url })),
  };
}

/** MESSAGE_REACTION_ADD as Discord sends it (https://discord.com/developers/docs/events/gateway-events#message-reaction-add). */
interface RawReaction {
  user_id?: unknown;
  channel_id?: unknown;
  message_id?: unknown;
  guild_id?: unknown;
  emoji?: { id?: unknown; name?: unknown } | null;
}

function reactionOf(d: RawReaction): InboundReaction | undefined {
  const { user_id, channel_id, message_id, guild_id, emoji } = d;
  if (typeof user_id !== 'string' || typeof channel_id !== 'string' || typeof message_id !== 'string' || typeof emoji?.name !== 'string') return undefined;
  const name = emoji.name;
  return { userId: user_id, channelId: channel_id, messageId: message_id, guildId: typeof guild_id === 'string' ? guild_id : undefined, emoji: typeof emoji.id === 'string' ? `${name}:${emoji.id}` : name };
}

/**
 * The gateway client: Discord's command surface (slash commands, answered through Herald's command
 * router) and the reporter of the bot's own messages with their nonces, which reconciliation uses.
 * Deliveries are sent over REST, so dispatchers need no gateway connection; one `serve` holds it.
 */
export async function connectGateway(options: {
  token: string;
  apiUrl: string | undefined;
  /** The slash commands to register, and what answers them; none: the bot's commands are left as they are, and not answered. */
  commands?: { definitions: readonly CommandDefinition[]; run: CommandHandler };
  /**
   * Whether the session stands without its commands registered: a failed registration is then said
   * in the log, and the session stays (another identity's bot, whose gateway serves its sends too).
   * Default: a failed registration fails the connection.
   */
  commandsOptional?: boolean;
  log: Logger;
  /** A message the bot itself created, with the nonce it was sent with (the gateway reports it). */
  onOwnMessage?: (message: OwnMessage) => Promise<void>;
  /** Where messages others write are handed on (the transport's Inbound facet). */
  inbound?: GatewayInbound;
  /** Ask for the privileged Message Content intent (DISCORD_MESSAGE_CONTENT: the bot was granted it). */
  messageContent?: boolean;
  /** Aborted: stop connecting, close whatever was opened, and reject. */
  signal?: AbortSignal;
}): Promise<GatewayConnection> {
  const { log, onOwnMessage, inbound } = options;
  const client = new Client({
    // Messages: Discord reports the bot's own messages with their nonce (no privileged intent needed).
    // Reactions (on Herald's own messages, for the inbox) and, where the operator says the bot was
    // granted it, the privileged Message Content intent (listened channels' text) while some module listens.
    intents: [
      GatewayIntentBits.Guilds,
      GatewayIntentBits.GuildMessages,
      GatewayIntentBits.DirectMessages,
      ...(inbound !== undefined ? [GatewayIntentBits.GuildMessageReactions, GatewayIntentBits.DirectMessageReactions] : []),
      ...(inbound !== undefined && options.messageContent === true ? [GatewayIntentBits.MessageContent] : []),
    ],
    // DM channels are not cached: without this, discord.js drops their MESSAGE_CREATE.
    partials: [Partials.Channel],
    // Herald reads messages only as they arrive: keep none of the guilds' traffic in memory.
    makeCache: Options.cacheWithLimits({ ...Options.DefaultMakeCacheSettings, MessageManager: 0 }),
    ...(options.apiUrl !== undefined ? { rest: { api: options.apiUrl } } : {}),
    // Identify waits that end when the shard closes (identify-throttler.ts).
    ws: { buildIdentifyThrottler: async (manager) => new AbortableIdentifyThrottler((await manager.fetchGatewayInformation()).session_start_limit.max_concurrency) },
  });
  if (onOwnMessage !== undefined) {
    client.on(Events.MessageCreate, (message) => {
      if (message.author.id !== client.user?.id || typeof message.nonce !== 'string') return;
      onOwnMessage({ nonce: message.nonce, channelId: message.channelId, messageId: message.id, createdAt: message.createdAt }).catch((err: unknown) =>
        log.warn({ err: errorSummary(err) }, 'could not record a sent message reported by the gateway'),
      );
    });
  }
  if (inbound !== undefined) {
    client.on(Events.MessageCreate, (message) => {
      if (message.author.id === client.user?.id) return;
      inbound.emit({
        channelId: message.channelId,
        messageId: message.id,
        authorId: message.author.id,
        authorIsBot: message.author.bot,
        guildId: message.guildId ?? undefined,
        content: message.content,
        createdAt: message.createdAt,
        heard: heardOf(message),
      });
    });
    // Reactions on any message the bot can see: the inbox keeps those on Herald's own. Read from the
    // raw event, so no message or reaction has to be cached first.
    client.on(Events.Raw, (packet: { t?: unknown; d?: unknown }) => {
      if (packet.t !== 'MESSAGE_REACTION_ADD' || typeof packet.d !== 'object' || packet.d === null) return;
      const reaction = reactionOf(packet.d as RawReaction);
      if (reaction !== undefined && reaction.userId !== client.user?.id) inbound.emitReaction(reaction);
    });
  }
  const { commands } = options;
  if (commands !== undefined) client.on(Events.InteractionCreate, (interaction) => {
    if (!interaction.isChatInputCommand()) return;
    const command = `${interaction.commandName} ${interaction.options.getSubcommand(false) ?? ''}`.trim();
    // Every reply is ephemeral (only the invoking user sees it) and pings no one.
    commands
      .run(invocationOf(interaction))
      .then((content) => interaction.reply({ content, flags: MessageFlags.Ephemeral, allowedMentions: { parse: [] } }))
      .then(
      () => log.info({ command, interaction_id: interaction.id }, 'command answered'),
      async (err: unknown) => {
        log.error({ command, err: errorSummary(err) }, 'command failed');
        if (!interaction.replied) await interaction.reply({ content: 'Something went wrong; try again in a moment.', flags: 64 }).catch(() => undefined);
      },
    );
  });
  client.on(Events.Error, (err) => log.error({ err: err.message }, 'gateway error'));
  guardPacketHandling(client, log);
  const ready = once(client, Events.ClientReady);
  // Settled here too: a login that throws first leaves it unawaited.
  ready.catch(() => undefined);
  // Aborted while connecting (the lease was lost): the client goes at once, and the wait below ends.
  const { signal } = options;
  const aborted = new Promise<never>((_resolve, reject) => {
    const stop = (): void => reject(signal?.reason instanceof Error ? signal.reason : new Error('gateway connection aborted'));
    if (signal?.aborted === true) stop();
    else signal?.addEventListener('abort', stop, { once: true });
  });
  aborted.catch(() => undefined);
  try {
    await Promise.race([
      (async () => {
        await client.login(options.token);
        await ready;
      })(),
      aborted,
    ]);
    if (commands !== undefined) {
      const registering = registerCommands(options.token, options.apiUrl, commands.definitions);
      if (options.commandsOptional === true) {
        const names = await Promise.race([registering.catch((err: unknown) => err), aborted]);
        if (Array.isArray(names)) log.info({ commands: names }, 'gateway connected; slash commands registered');
        else log.warn({ err: errorSummary(names) }, 'gateway connected; its slash commands could not be registered (they answer once registered at a later connection)');
      } else {
        const names = await Promise.race([registering, aborted]);
        log.info({ commands: names }, 'gateway connected; slash commands registered');
      }
    } else log.info('gateway connected');
  } catch (err) {
    // Whatever failed, the client (and a session it may have opened) goes with it: nothing else can
    // close it. Destroying a client still connecting can wait on a handshake that never ends: the
    // caller waits at most DESTROY_WAIT_MS for it (it goes on being destroyed).
    const destroyed = destroyClient(client).catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([destroyed, new Promise((r) => (timer = setTimeout(r, DESTROY_WAIT_MS)))]);
    clearTimeout(timer);
    throw err;
  }
  return {
    get ready() {
      // isReady() stays true after the first READY; the shards say whether the connection is up now.
      return client.isReady() && client.ws.shards.every((shard) => shard.status === Status.Ready);
    },
    close: () => destroyClient(client),
  };
}

/** A shard's socket, as far as closing it goes (the `ws` package's, or the global WebSocket). */
interface ShardSocket {
  readonly readyState: number;
  addEventListener(type: 'error', listener: () => void): void;
  close(): void;
}
const CONNECTING = 0;

/**
 * discord.js destroys a shard whose socket is still in its handshake by taking the socket's error
 * listener away and leaving it be: the handshake's end (Discord, or a proxy, resetting it) is then
 * an error nobody listens to, an uncaught exception that ends the process. Each shard's socket gets
 * a listener of its own first, and one still connecting after the destroy is closed.
 */
async function destroyClient(client: Client): Promise<void> {
  const internals = client.ws as unknown as { _ws?: { strategy?: { shards?: Map<unknown, { connection?: ShardSocket | null }> } } | null };
  const sockets: ShardSocket[] = [];
  for (const shard of internals._ws?.strategy?.shards?.values() ?? []) if (shard.connection) sockets.push(shard.connection);
  for (const socket of sockets) socket.addEventListener('error', () => undefined);
  await client.destroy();
  for (const socket of sockets) if (socket.readyState === CONNECTING) socket.close();
}

/**
 * discord.js handles each gateway event (and runs the listeners it emits, ours included)
 * synchronously inside its WebSocket message handler, where a throw becomes an unhandled
 * rejection that ends the process: e.g. an INTERACTION_CREATE whose member permissions are not a
 * number. Such an event is logged and dropped instead; the connection and other events go on.
 */
function guardPacketHandling(client: Client, log: Logger): void {
  const ws = client.ws as unknown as { handlePacket(packet?: { t?: unknown }, shard?: unknown): boolean };
  const handlePacket = ws.handlePacket.bind(ws);
  ws.handlePacket = (packet, shard) => {
    try {
      return handlePacket(packet, shard);
    } catch (err) {
      log.error({ event: typeof packet?.t === 'string' ? packet.t : undefined, err: errorSummary(err) }, 'gateway event could not be handled; dropped');
      return true;
    }
  };
}
