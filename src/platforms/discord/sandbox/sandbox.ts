import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { clientCaused, errorSummary } from '../../../infra/errors.js';
import { readJsonBody } from '../../../infra/http/body.js';
import { controlRoutes, Interactions, SandboxError, type InteractionReply, type Invocation, type MappedDestination } from './control.js';
import { Faults, RateLimits, type Fault, type RateLimitRule } from './faults.js';
import { SandboxGateway, threadChannel } from './gateway.js';
import { GuildMembers, SANDBOX_MEMBER_IDS, userMessageRoute, userReactionRoute, writeAsUser } from './guild-members.js';
import { SANDBOX_IDS } from './ids.js';
import { MediaHistory, mediaRoutes, SANDBOX_MEDIA_CHANNEL, SANDBOX_MEDIA_MESSAGES } from './media-history.js';
import { discordError } from './errors.js';
import { restRoutes, type RequestLogEntry } from './rest.js';
import { attachmentRoutes, AttachmentStore, DISCORD_UPLOAD_LIMITS, type UploadLimits } from './attachments.js';
import { mentionsOf, publicUser, SandboxState, THREAD_TYPE, type RegisteredCommand, type SandboxChannel, type SandboxGuild, type DeletedMessage, type SandboxMessage, type SandboxUser } from './state.js';

export { SANDBOX_IDS, SANDBOX_MEDIA_CHANNEL, SANDBOX_MEMBER_IDS, SandboxError };
export type { Fault, InteractionReply, Invocation, MappedDestination, RateLimitRule, SandboxChannel, SandboxMessage, SandboxUser };

/**
 * A local Discord: the slice of the REST API Herald uses (channels, messages with nonce
 * enforcement, DM channels, rate limits), with fault injection, reached by the real discord.js
 * code through `DISCORD_API_URL`. Used by sandbox mode and as the test double.
 *
 * This class puts together the parts: the world (state.ts), the REST routes (rest.ts), the
 * gateway (gateway.ts), faults and rate limits (faults.ts), and the sandbox page and control API
 * (control.ts), served on one port.
 */

export interface SandboxOptions {
  botToken?: string;
  /**
   * Window of `enforce_nonce` deduplication. Discord documents "a few minutes". Shortcut: the
   * default (5 minutes) outlasts every test, so a resend in a test is deduped unless the test sets
   * a short window. Past its window a resend creates a second message, as on Discord
   * (test/sandbox-nonce-window.test.ts); tests that set a short one exercise Herald's reconciling by
   * channel history (test/in-doubt.test.ts, test/send-proof.test.ts).
   */
  nonceWindowMs?: number;
  /** Per route and major parameter (channel). Default 50 per second. */
  routeLimit?: RateLimitRule;
  /** Across all routes. Default none. */
  globalLimit?: RateLimitRule | undefined;
  /** Seed the sandbox guild, its channels and a user. Default true. */
  seed?: boolean;
  /**
   * Keep guilds, channels, users and messages in this JSON file across restarts (sandbox mode
   * keeps it in the data folder). Default: in memory only.
   */
  stateFile?: string;
  /** Messages in the generated media channel (SANDBOX_MEDIA_CHANNEL). Default 20,000; 0 for none. */
  mediaMessages?: number;
  /** Largest file one message may carry (Discord's 10 MiB by default; a boosted server's is larger). */
  maxFileBytes?: number;
}

export class DiscordSandbox {
  readonly botToken: string;
  readonly bot: SandboxUser;
  readonly users: Map<string, SandboxUser>;
  readonly guilds: Map<string, SandboxGuild>;
  readonly channels: Map<string, SandboxChannel>;
  readonly messages: Map<string, SandboxMessage[]>;
  readonly commands: RegisteredCommand[];
  /** Every REST request received, for tests: method, path after /api/v10, status answered. */
  readonly requests: RequestLogEntry[] = [];
  url = '';
  /** Herald's destination mappings, for the sandbox page (set by sandbox mode once Herald runs). */
  destinations: (() => Promise<MappedDestination[]>) | undefined;
  private readonly state: SandboxState;
  private readonly faults = new Faults();
  private readonly rateLimits: RateLimits;
  private readonly interactions: Interactions;
  /** Guild roles, members (with their roles) and owners. */
  readonly people: GuildMembers;
  /** The generated media channel, for the media archive. */
  readonly media: MediaHistory | undefined;
  /** The name of every media file requested from the sandbox's CDN, for tests. */
  readonly mediaRequests: string[] = [];
  /** The id of every attachment requested from the sandbox's CDN, for tests. */
  readonly attachmentRequests: string[] = [];
  /** Attachments' bytes (beside the state file when there is one). */
  private readonly attachmentStore: AttachmentStore;
  private readonly uploadLimits: UploadLimits;
  private server: Server | undefined;
  private gateway: SandboxGateway | undefined;
  /** Every bot the sandbox hosts, by token: Herald's own, and others added with addBot. */
  private readonly botTokens = new Map<string, SandboxUser>();

  constructor(options: SandboxOptions = {}) {
    this.botToken = options.botToken ?? `sandbox.${randomBytes(18).toString('base64url')}`;
    this.state = new SandboxState({ nonceWindowMs: options.nonceWindowMs ?? 5 * 60_000, seed: options.seed ?? true, file: options.stateFile });
    this.rateLimits = new RateLimits(options.routeLimit ?? { limit: 50, windowMs: 1_000 }, options.globalLimit);
    this.interactions = new Interactions({
      state: this.state,
      sessions: (botId) => this.gateway?.sessionsOf(botId) ?? 0,
      dispatch: (botId, type, data) => this.gateway?.dispatchTo(botId, type, data),
    });
    this.people = new GuildMembers(this.state);
    this.attachmentStore = new AttachmentStore(options.stateFile !== undefined ? `${options.stateFile}.attachments` : undefined);
    this.uploadLimits = { ...DISCORD_UPLOAD_LIMITS, ...(options.maxFileBytes !== undefined ? { maxFileBytes: options.maxFileBytes } : {}) };
    const mediaMessages = options.mediaMessages ?? SANDBOX_MEDIA_MESSAGES;
    this.media = mediaMessages > 0 ? new MediaHistory(mediaMessages, () => this.url) : undefined;
    if (options.seed ?? true) this.people.seed();
    this.bot = this.state.bot;
    this.users = this.state.users;
    this.guilds = this.state.guilds;
    this.channels = this.state.channels;
    this.messages = this.state.messages;
    this.commands = this.state.commands;
    this.botTokens.set(this.botToken, this.bot);
  }

  /**
   * Another bot user in this Discord, with a token of its own (a second Herald can run as it, e.g.
   * to hand off to the first). The same username returns the same bot. Ids are 111111111111111112,
   * …13, … in the order bots are added (Herald's own is 111111111111111111).
   */
  /**
   * Revoke a bot's token, as resetting it in Discord's developer portal does: its requests are
   * answered 401 from now on, and its gateway sessions closed with 4004 (Authentication failed).
   */
  revokeBot(token: string): void {
    const bot = this.botTokens.get(token);
    if (bot === undefined) return;
    this.botTokens.delete(token);
    this.gateway?.closeSessionsOf(bot.id, 4004, 'Authentication failed.');
  }

  addBot(username: string): { user: SandboxUser; token: string } {
    for (const [token, user] of this.botTokens) if (user.username === username) return { user, token };
    // A bot the saved world already has (an earlier start) keeps its id; a new one takes the next free id.
    const saved = [...this.state.users.values()].find((u) => u.bot === true && u.username === username && u.id !== this.bot.id);
    let next = BigInt(this.bot.id) + BigInt(this.botTokens.size);
    while (saved === undefined && this.state.users.has(String(next)) && this.state.users.get(String(next))?.username !== username) next += 1n;
    const id = saved?.id ?? String(next);
    const user: SandboxUser = this.state.users.get(id) ?? { id, username, global_name: username, bot: true };
    this.state.addUser(user);
    this.state.save();
    const token = `sandbox.${randomBytes(18).toString('base64url')}`;
    this.botTokens.set(token, user);
    return { user, token };
  }

  /** The commands a bot's application has registered (Herald's own bot's: `commands`). */
  commandsOf(botId: string): readonly RegisteredCommand[] {
    return botId === this.state.applicationId ? this.state.commands : (this.state.otherCommands.get(botId) ?? []);
  }

  /** The bots the sandbox hosts, Herald's own first. */
  bots(): { user: SandboxUser; token: string }[] {
    return [...this.botTokens].map(([token, user]) => ({ user, token }));
  }

  /** A public thread in a guild text channel; every connected bot is told (THREAD_CREATE). */
  createThread(parentId: string, name: string, id?: string): SandboxChannel {
    const parent = this.state.channels.get(parentId);
    if (parent === undefined || parent.guild_id === undefined || parent.type !== 0) throw new SandboxError('threads start in a guild text channel');
    const thread: SandboxChannel = { id: id ?? this.state.nextSnowflake(), type: THREAD_TYPE, name, guild_id: parent.guild_id, parent_id: parent.id };
    this.state.addChannel(thread);
    this.state.save();
    this.gateway?.dispatchAll('THREAD_CREATE', { ...threadChannel(parent.guild_id, thread), newly_created: true });
    return thread;
  }

  /** Base URL for discord.js (`DISCORD_API_URL`): it appends /v10. */
  get apiUrl(): string {
    return `${this.url}/api`;
  }

  /** The bot's application id (as on Discord, the bot user's id). */
  get applicationId(): string {
    return this.state.applicationId;
  }

  /** Gateway sessions identified right now. */
  get gatewaySessions(): number {
    return this.gateway?.connected ?? 0;
  }

  addGuild(id: string, name: string): void {
    this.state.addGuild(id, name);
  }
  addChannel(channel: SandboxChannel): void {
    this.state.addChannel(channel);
  }
  addUser(user: SandboxUser): void {
    this.state.addUser(user);
  }

  /**
   * A message written by a user (as if typed in Discord), e.g. the source message of a command;
   * with `type`, a system message Discord shows under their name instead (7: they joined).
   */
  writeAsUser(userId: string, channelId: string, content: string, type = 0): SandboxMessage {
    const author = this.state.users.get(userId);
    if (author === undefined || !this.state.channels.has(channelId)) throw new SandboxError('unknown user or channel');
    return writeAsUser(this.state, author, channelId, content, type);
  }

  /** Make the next matching requests misbehave. */
  inject(fault: Fault): void {
    this.faults.inject(fault);
  }
  clearFaults(): void {
    this.faults.clear();
  }

  /** Every message in a channel, oldest first. */
  channelMessages(channelId: string): SandboxMessage[] {
    return this.state.channelMessages(channelId);
  }
  allMessages(): SandboxMessage[] {
    return this.state.allMessages();
  }
  /** The message with this id in this channel (undefined once deleted). */
  findMessage(channelId: string, messageId: string): SandboxMessage | undefined {
    return this.state.findMessage(channelId, messageId);
  }
  /** Messages deleted, oldest deletion first. */
  get deleted(): readonly DeletedMessage[] {
    return this.state.deleted;
  }

  /**
   * Act as a user invoking a slash command: dispatch INTERACTION_CREATE to the bot's gateway
   * sessions and wait for its reply (the interaction callback).
   */
  invoke(invocation: Invocation, timeoutMs = 10_000): Promise<InteractionReply> {
    return this.interactions.invoke(invocation, timeoutMs);
  }

  async start(port = 0, host = '127.0.0.1'): Promise<this> {
    const app = new Koa();
    // Not Koa's stack trace on stderr for a client that went away mid-request; one line for the sandbox's own faults.
    app.on('error', (err: unknown) => {
      if (!clientCaused(err)) process.stderr.write(`sandbox request failed: ${errorSummary(err)}\n`);
    });
    // Discord accepts percent-encoded paths (discord.js sends /users/%40me).
    app.use(async (ctx, next) => {
      try {
        ctx.path = decodeURIComponent(ctx.path);
      } catch {
        // A malformed %-escape names no route here.
        return discordError(ctx, 404, 0, '404: Not Found');
      }
      await next();
    });
    const control = controlRoutes({ state: this.state, faults: this.faults, interactions: this.interactions, destinations: () => this.destinations?.() ?? Promise.resolve(null) });
    const rest = restRoutes({
      state: this.state,
      botFor: (token) => this.botTokens.get(token),
      dispatchMessage: (data) => this.gateway?.dispatchMessage(data),
      faults: this.faults,
      rateLimits: this.rateLimits,
      requests: this.requests,
      url: () => this.url,
      takeInteraction: (id) => this.interactions.take(id),
      people: this.people,
      media: this.media,
      files: { store: this.attachmentStore, limits: this.uploadLimits },
      startThread: (parentId, name, id) => {
        const parent = this.state.channels.get(parentId);
        return parent === undefined || parent.guild_id === undefined || parent.type !== 0 ? undefined : this.createThread(parentId, name, id);
      },
    });
    // People's messages reach every connected bot, with content only for the bots they mention.
    userMessageRoute(control, this.state, (_type, data) => {
      const { repliedTo, ...d } = data as { content: string; author: { id: string }; repliedTo?: string } & Record<string, unknown>;
      const mentioned = new Set([...mentionsOf({ content: d.content }).users, ...(repliedTo !== undefined ? [repliedTo] : [])]);
      this.gateway?.dispatchMessage({ ...d, mentions: [...mentioned].map((id) => ({ id })) });
    });
    // A reaction in a DM reaches the bot the DM channel is with; elsewhere, Herald's own bot.
    userReactionRoute(control, this.state, (type, data) => {
      const channel = this.state.channels.get(String((data as { channel_id?: unknown }).channel_id));
      const dmBot = channel !== undefined ? this.state.dmBotOf(channel) : undefined;
      if (dmBot !== undefined) this.gateway?.dispatchTo(dmBot, type, data);
      else this.gateway?.dispatch(type, data);
    });
    botRoutes(control, this);
    const attachmentOf = (channelId: string, id: string) => this.state.channelMessages(channelId).flatMap((m) => m.attachments ?? []).find((a) => a.id === id);
    app.use(control.routes()).use(rest.routes()).use(mediaRoutes(this.mediaRequests).routes()).use(attachmentRoutes(this.attachmentStore, attachmentOf, this.attachmentRequests).routes());
    const server = createServer(app.callback());
    // Listen first: a WebSocket server attached earlier re-emits a listen error (a port in use)
    // as its own unhandled 'error' event, which ends the process with a stack trace.
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    this.gateway = new SandboxGateway(server, {
      botFor: (token) => {
        const bot = this.botTokens.get(token);
        return bot === undefined ? undefined : { id: bot.id, user: publicUser(bot) };
      },
      primaryBotId: this.bot.id,
      dmBotOf: (channelId) => {
        const channel = this.state.channels.get(channelId);
        return channel !== undefined ? this.state.dmBotOf(channel) : undefined;
      },
      guilds: () => this.state.gatewayGuilds(),
    });
    const address = server.address() as AddressInfo;
    this.url = `http://${host}:${address.port}`;
    return this;
  }

  async close(): Promise<void> {
    const server = this.server;
    if (server === undefined) return;
    this.server = undefined;
    this.gateway?.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/**
 * Control routes for more bots and threads: `POST /sandbox/api/bots {"username"}` answers that
 * bot's id and token (a second Herald runs with them: DISCORD_TOKEN, DISCORD_API_URL), `GET` lists
 * them; `POST /sandbox/api/threads {"channelId","name"}` starts a public thread. Local only:
 * refused to other origins, like the other routes that act for someone.
 */
function botRoutes(router: ReturnType<typeof controlRoutes>, sandbox: DiscordSandbox): void {
  const sameOrigin = (ctx: Koa.Context): boolean => {
    const origin = ctx.get('origin');
    const site = ctx.get('sec-fetch-site');
    if ((origin !== '' && origin !== `${ctx.protocol}://${ctx.host}`) || (site !== '' && site !== 'same-origin' && site !== 'none')) {
      ctx.status = 403;
      ctx.body = { error: 'cross-origin requests are refused' };
      return false;
    }
    return true;
  };
  router.post('/sandbox/api/bots', async (ctx) => {
    if (!sameOrigin(ctx)) return;
    const body = await readJsonBody(ctx.req);
    const username = body.ok ? (body.value as { username?: unknown }).username : undefined;
    if (typeof username !== 'string' || !/^[a-z0-9_.]{2,32}$/.test(username)) {
      ctx.status = 400;
      ctx.body = { error: 'expected {username}: 2-32 lower-case letters, digits, _ or .' };
      return;
    }
    const { user, token } = sandbox.addBot(username);
    ctx.body = { id: user.id, username: user.username, token };
  });
  router.get('/sandbox/api/bots', (ctx) => {
    if (!sameOrigin(ctx)) return;
    ctx.body = sandbox.bots().map(({ user, token }) => ({ id: user.id, username: user.username, token }));
  });
  router.post('/sandbox/api/threads', async (ctx) => {
    if (!sameOrigin(ctx)) return;
    const body = await readJsonBody(ctx.req);
    const input = (body.ok ? body.value : {}) as { channelId?: unknown; name?: unknown };
    try {
      const thread = sandbox.createThread(String(input.channelId), typeof input.name === 'string' && input.name !== '' ? input.name.slice(0, 100) : 'thread');
      ctx.body = { id: thread.id, parent_id: thread.parent_id, name: thread.name };
    } catch (err) {
      if (!(err instanceof SandboxError)) throw err;
      ctx.status = 400;
      ctx.body = { error: err.message };
    }
  });
}
