import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import Koa, { type Context } from 'koa';
import { readJsonBody } from '../platform/http/body.js';
import { SandboxGateway } from './gateway.js';
import { SANDBOX_IDS } from './ids.js';
import { SANDBOX_PAGE } from './page.js';

export { SANDBOX_IDS };

/**
 * A local Discord: the slice of the REST API Herald uses (channels, messages with nonce
 * enforcement, DM channels, rate limits), with fault injection, reached by the real discord.js
 * code through `DISCORD_API_URL`. Used by sandbox mode and as the test double.
 */

const DISCORD_EPOCH = 1420070400000n;

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
  type: 0;
  /** Kept for inspection; Discord does not list it either (only the create response has it). */
  nonce?: string | number;
  allowed_mentions?: unknown;
  edits: number;
}

export interface Fault {
  /** Method to match, e.g. POST; any when absent. */
  method?: string;
  /** Regular expression over the path after /api/v10, e.g. "^/channels/[0-9]+/messages$". */
  path?: string;
  /**
   * error: answer `status` with Discord's error `code`; delay: wait `ms`, then handle;
   * drop_after_create: create the message, then close the connection without answering;
   * delay_after_create: create the message, then wait `ms` before answering;
   * error_after_create: create the message, then answer `status` (default 500) as if it failed.
   */
  action: 'error' | 'delay' | 'drop_after_create' | 'delay_after_create' | 'error_after_create';
  status?: number;
  code?: number;
  ms?: number;
  /** How many matching requests it applies to (default 1). */
  times?: number;
}

/** A slash command as a user invokes it (through the control route or the sandbox page). */
export interface Invocation {
  userId: string;
  /** Absent: invoked in a DM with the bot. */
  guildId?: string | undefined;
  channelId?: string | undefined;
  command: string;
  subcommand?: string | undefined;
  /** Option values by name; typed from the registered command. */
  options?: Record<string, string | number | boolean> | undefined;
  /** The member's permissions in the guild (a bit-set as a decimal string). Default: none. */
  permissions?: string | undefined;
}

/** What the bot answered an interaction with. */
export interface InteractionReply {
  type: number;
  data?: { content?: string; flags?: number };
}

interface RegisteredCommand {
  id: string;
  name: string;
  options?: { type: number; name: string; options?: { type: number; name: string }[] }[];
  [key: string]: unknown;
}

export interface RateLimitRule {
  limit: number;
  windowMs: number;
}

export interface SandboxOptions {
  botToken?: string;
  /** Window of `enforce_nonce` deduplication. Discord documents "a few minutes". */
  nonceWindowMs?: number;
  /** Per route and major parameter (channel). Default 50 per second. */
  routeLimit?: RateLimitRule;
  /** Across all routes. Default none. */
  globalLimit?: RateLimitRule | undefined;
  /** Seed the sandbox guild, its channels and a user. Default true. */
  seed?: boolean;
}

export class DiscordSandbox {
  readonly botToken: string;
  readonly bot: SandboxUser = { id: '111111111111111111', username: 'herald', global_name: 'Herald', bot: true };
  readonly users = new Map<string, SandboxUser>();
  readonly guilds = new Map<string, { id: string; name: string }>();
  readonly channels = new Map<string, SandboxChannel>();
  readonly messages = new Map<string, SandboxMessage[]>();
  private readonly nonces = new Map<string, { messageId: string; at: number }>();
  private readonly faults: (Fault & { remaining: number })[] = [];
  private readonly buckets = new Map<string, { start: number; count: number }>();
  private readonly globalBucket = { start: 0, count: 0 };
  private readonly options: Required<Omit<SandboxOptions, 'globalLimit' | 'botToken'>> & { globalLimit: RateLimitRule | undefined };
  private server: Server | undefined;
  private gateway: SandboxGateway | undefined;
  readonly commands: RegisteredCommand[] = [];
  private readonly pendingReplies = new Map<string, (reply: InteractionReply) => void>();
  private lastSnowflakeMs = 0n;
  private increment = 0n;
  /** Every REST request received, for tests: method, path after /api/v10, status answered. */
  readonly requests: { method: string; path: string; status: number }[] = [];
  url = '';

  constructor(options: SandboxOptions = {}) {
    this.botToken = options.botToken ?? `sandbox.${randomBytes(18).toString('base64url')}`;
    this.options = {
      nonceWindowMs: options.nonceWindowMs ?? 5 * 60_000,
      routeLimit: options.routeLimit ?? { limit: 50, windowMs: 1_000 },
      globalLimit: options.globalLimit,
      seed: options.seed ?? true,
    };
    this.users.set(this.bot.id, this.bot);
    if (this.options.seed) this.seed();
  }

  /** Base URL for discord.js (`DISCORD_API_URL`): it appends /v10. */
  get apiUrl(): string {
    return `${this.url}/api`;
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

  /** Make the next matching requests misbehave. */
  inject(fault: Fault): void {
    this.faults.push({ ...fault, remaining: fault.times ?? 1 });
  }
  clearFaults(): void {
    this.faults.length = 0;
  }

  /** Every message in a channel, oldest first. */
  channelMessages(channelId: string): SandboxMessage[] {
    return [...(this.messages.get(channelId) ?? [])];
  }
  allMessages(): SandboxMessage[] {
    return [...this.messages.values()].flat();
  }

  async start(port = 0, host = '127.0.0.1'): Promise<this> {
    const app = new Koa();
    // Discord accepts percent-encoded paths (discord.js sends /users/%40me).
    app.use(async (ctx, next) => {
      try {
        ctx.path = decodeURIComponent(ctx.path);
      } catch {
        // A malformed %-escape names no route here.
        ctx.status = 404;
        ctx.body = { message: '404: Not Found', code: 0 };
        return;
      }
      await next();
    });
    this.mount(app);
    this.server = createServer(app.callback());
    this.gateway = new SandboxGateway(this.server, {
      botToken: this.botToken,
      botUser: publicUser(this.bot),
      applicationId: this.applicationId,
      guilds: () => [...this.guilds.values()].map((g) => ({ ...g, channels: [...this.channels.values()].filter((c) => c.guild_id === g.id) })),
    });
    await new Promise<void>((resolve, reject) => {
      this.server?.once('error', reject);
      this.server?.listen(port, host, () => resolve());
    });
    const address = this.server.address() as AddressInfo;
    this.url = `http://${host}:${address.port}`;
    return this;
  }

  /** The bot's application id (as on Discord, the bot user's id). */
  get applicationId(): string {
    return this.bot.id;
  }

  /** Gateway sessions identified right now. */
  get gatewaySessions(): number {
    return this.gateway?.connected ?? 0;
  }

  /**
   * Act as a user invoking a slash command: dispatch INTERACTION_CREATE to the bot's gateway
   * sessions and wait for its reply (the interaction callback).
   */
  async invoke(invocation: Invocation, timeoutMs = 10_000): Promise<InteractionReply> {
    const user = this.users.get(invocation.userId);
    if (user === undefined) throw new SandboxError(`unknown user ${invocation.userId}`);
    const command = this.commands.find((c) => c.name === invocation.command);
    if (command === undefined) throw new SandboxError(`/${invocation.command} is not registered with this application`);
    if (this.gatewaySessions === 0) throw new SandboxError('the bot is not connected to the gateway');
    const interaction = this.interactionPayload(invocation, user, command);
    const reply = new Promise<InteractionReply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pendingReplies.delete(String(interaction['id']));
        reject(new SandboxError('the bot did not answer the interaction'));
      }, timeoutMs);
      this.pendingReplies.set(String(interaction['id']), (r) => {
        clearTimeout(timer);
        resolve(r);
      });
    });
    this.gateway?.dispatch('INTERACTION_CREATE', interaction);
    return reply;
  }

  /**
   * The control route's input as an Invocation, or what is wrong with it. Everything that ends up
   * in the INTERACTION_CREATE payload is checked: the bot's Discord library trusts the gateway.
   */
  private parseInvocation(value: unknown): Invocation | string {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return `expected ${INVOCATION_SHAPE}`;
    const v = value as Record<string, unknown>;
    if (typeof v['userId'] !== 'string' || !SNOWFLAKE.test(v['userId'])) return 'userId must be a snowflake (a string of digits)';
    if (typeof v['command'] !== 'string' || !NAME.test(v['command'])) return 'command must be a command name';
    for (const key of ['guildId', 'channelId'] as const) {
      const id = v[key];
      if (id !== undefined && id !== null && (typeof id !== 'string' || !SNOWFLAKE.test(id))) return `${key} must be a snowflake (a string of digits)`;
    }
    const subcommand = v['subcommand'];
    if (subcommand !== undefined && subcommand !== null && (typeof subcommand !== 'string' || !NAME.test(subcommand))) return 'subcommand must be a subcommand name';
    const permissions = v['permissions'];
    if (permissions !== undefined && permissions !== null && (typeof permissions !== 'string' || !/^[0-9]{1,20}$/.test(permissions) || BigInt(permissions) >= 1n << 64n)) {
      return 'permissions must be a permission bit-set as a decimal string, e.g. "32" for Manage Server';
    }
    const options = v['options'];
    const checked: Record<string, string | number | boolean> = {};
    if (options !== undefined && options !== null) {
      if (typeof options !== 'object' || Array.isArray(options)) return 'options must be an object of option values by name';
      const entries = Object.entries(options as Record<string, unknown>);
      if (entries.length > 25) return 'options must have at most 25 values';
      const registered = this.commands.find((c) => c.name === v['command'])?.options?.find((o) => o.type === 1 && o.name === subcommand)?.options;
      for (const [name, option] of entries) {
        if (!NAME.test(name)) return 'options must be an object of option values by name';
        const type = registered?.find((o) => o.name === name)?.type ?? 3;
        const problem = optionProblem(type, option);
        if (problem !== undefined) return `options.${name} ${problem}`;
        checked[name] = option as string | number | boolean;
      }
    }
    const text = (x: unknown): string | undefined => (typeof x === 'string' ? x : undefined);
    return {
      userId: v['userId'],
      command: v['command'],
      subcommand: text(subcommand),
      guildId: text(v['guildId']),
      channelId: text(v['channelId']),
      options: checked,
      permissions: text(permissions),
    };
  }

  private interactionPayload(inv: Invocation, user: SandboxUser, command: RegisteredCommand): Record<string, unknown> {
    const sub = command.options?.find((o) => o.type === 1 && o.name === inv.subcommand);
    const resolvedChannels: Record<string, unknown> = {};
    const values = Object.entries(inv.options ?? {}).map(([name, value]) => {
      const type = sub?.options?.find((o) => o.name === name)?.type ?? 3;
      if (type === 7) {
        const ch = this.channels.get(String(value));
        resolvedChannels[String(value)] = { id: String(value), name: ch?.name ?? 'unknown', type: ch?.type ?? 0, permissions: '0', ...(ch?.guild_id ? { guild_id: ch.guild_id } : {}) };
      }
      return { name, type, value: type === 7 ? String(value) : value };
    });
    const options = inv.subcommand !== undefined ? [{ type: 1, name: inv.subcommand, options: values }] : values;
    const guildId = inv.guildId;
    const channelId = inv.channelId ?? (guildId !== undefined ? [...this.channels.values()].find((c) => c.guild_id === guildId && c.type === 0)?.id : undefined) ?? this.nextSnowflake();
    const base = {
      id: this.nextSnowflake(),
      application_id: this.applicationId,
      type: 2,
      token: randomBytes(24).toString('base64url'),
      version: 1,
      data: { id: command.id, name: command.name, type: 1, options, ...(Object.keys(resolvedChannels).length > 0 ? { resolved: { channels: resolvedChannels } } : {}) },
      channel_id: channelId,
      app_permissions: '2248473465835073',
      locale: 'en-US',
      entitlements: [],
      attachment_size_limit: 8388608,
    };
    if (guildId === undefined) {
      return { ...base, user: publicUser(user), channel: { id: channelId, type: 1 }, context: 1, authorizing_integration_owners: { '1': user.id } };
    }
    return {
      ...base,
      guild_id: guildId,
      guild_locale: 'en-US',
      channel: { id: channelId, type: 0, guild_id: guildId, name: this.channels.get(channelId)?.name ?? 'channel' },
      member: { user: publicUser(user), roles: [], permissions: inv.permissions ?? '0', joined_at: new Date(0).toISOString(), deaf: false, mute: false, flags: 0 },
      context: 0,
      authorizing_integration_owners: { '0': guildId },
    };
  }

  async close(): Promise<void> {
    const server = this.server;
    if (server === undefined) return;
    this.server = undefined;
    this.gateway?.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private nextSnowflake(): string {
    const ms = BigInt(Date.now()) - DISCORD_EPOCH;
    if (ms === this.lastSnowflakeMs) this.increment += 1n;
    else {
      this.lastSnowflakeMs = ms;
      this.increment = 0n;
    }
    return String((ms << 22n) | (1n << 17n) | (this.increment & 0xfffn));
  }

  private mount(app: Koa): void {
    const router = new Router();
    router.get('/', (ctx) => ctx.redirect('/sandbox'));
    router.get('/sandbox', (ctx) => {
      ctx.type = 'html';
      ctx.body = SANDBOX_PAGE;
    });
    router.get('/sandbox/api/state', (ctx) => {
      ctx.body = {
        guilds: [...this.guilds.values()].map((g) => ({
          ...g,
          channels: [...this.channels.values()].filter((c) => c.guild_id === g.id).map((c) => ({ id: c.id, name: c.name, type: c.type })),
        })),
        dm_channels: [...this.channels.values()].filter((c) => c.type === 1).map((c) => ({ id: c.id, recipients: c.recipients?.map((u) => u.id) })),
        users: [...this.users.values()],
        messages: this.allMessages(),
      };
    });
    router.post('/sandbox/api/faults', async (ctx) => {
      const body = await readJsonBody(ctx.req);
      if (!body.ok || typeof body.value !== 'object' || body.value === null) {
        ctx.status = 400;
        ctx.body = { error: 'expected a fault object' };
        return;
      }
      const problem = faultProblem(body.value as Record<string, unknown>);
      if (problem !== undefined) {
        ctx.status = 400;
        ctx.body = { error: problem };
        return;
      }
      this.inject(body.value as Fault);
      ctx.status = 204;
    });
    router.post('/sandbox/api/interactions', async (ctx) => {
      // The control route acts as a user: a web page elsewhere must not be able to drive it from
      // the operator's browser. A JSON content type cannot be sent cross-site without a CORS
      // preflight (which is not answered), and a foreign Origin or Sec-Fetch-Site is refused.
      const origin = ctx.get('origin');
      const site = ctx.get('sec-fetch-site');
      if ((origin !== '' && origin !== `${ctx.protocol}://${ctx.host}`) || (site !== '' && site !== 'same-origin' && site !== 'none')) {
        return controlError(ctx, 403, 'cross-origin requests are refused');
      }
      if (ctx.is('application/json') !== 'application/json') return controlError(ctx, 415, 'Content-Type must be application/json');
      const body = await readJsonBody(ctx.req);
      if (!body.ok) {
        if (body.problem === 'aborted') {
          ctx.respond = false;
          return undefined;
        }
        if (body.problem === 'too_large') ctx.set('Connection', 'close');
        return body.problem === 'too_large' ? controlError(ctx, 413, 'request body too large') : controlError(ctx, 400, 'request body must be valid JSON');
      }
      const inv = this.parseInvocation(body.value);
      if (typeof inv === 'string') return controlError(ctx, 400, inv);
      try {
        ctx.body = await this.invoke(inv);
      } catch (err) {
        if (!(err instanceof SandboxError)) throw err;
        return controlError(ctx, 409, err.message);
      }
      return undefined;
    });
    router.delete('/sandbox/api/faults', (ctx) => {
      this.clearFaults();
      ctx.status = 204;
    });

    const api = new Router({ prefix: '/api/v10' });
    api.use(async (ctx, next) => {
      // Interaction callbacks are authorized by the interaction's token in the URL, not the bot token.
      const byInteractionToken = ctx.path.startsWith('/api/v10/interactions/');
      if (!byInteractionToken && ctx.get('authorization') !== `Bot ${this.botToken}`) return discordError(ctx, 401, 0, '401: Unauthorized');
      const path = ctx.path.slice('/api/v10'.length);
      const seen = { method: ctx.method, path, status: 0 };
      this.requests.push(seen);
      try {
        const fault = this.takeFault(ctx.method, path);
        if (fault?.action === 'error') return discordError(ctx, fault.status ?? 500, fault.code ?? 0, 'Injected failure');
        if (fault?.action === 'delay') await sleep(fault.ms ?? 1_000);
        if (ctx.req.destroyed) {
          // The client gave up (a timeout) while the fault held its request.
          ctx.respond = false;
          return undefined;
        }
        if (!this.rateLimit(ctx, path)) return undefined;
        ctx.state['fault'] = fault;
        return await next();
      } finally {
        seen.status = ctx.status;
      }
    });
    api.get('/users/@me', (ctx) => {
      ctx.body = publicUser(this.bot);
    });
    api.get('/gateway/bot', (ctx) => {
      ctx.body = {
        url: this.url.replace(/^http/, 'ws') + '/gateway',
        shards: 1,
        session_start_limit: { total: 1000, remaining: 1000, reset_after: 0, max_concurrency: 1 },
      };
    });
    api.get('/applications/@me', (ctx) => {
      ctx.body = { id: this.applicationId, name: 'Herald', flags: 0, bot_public: false, bot_require_code_grant: false, verify_key: '', icon: null, description: '' };
    });
    api.put('/applications/:appId/commands', async (ctx) => {
      if (ctx.params['appId'] !== this.applicationId) return discordError(ctx, 403, 50001, 'Missing Access');
      const body = await readJsonBody(ctx.req);
      if (!body.ok || !Array.isArray(body.value)) return discordError(ctx, 400, 50035, 'Invalid Form Body');
      this.commands.length = 0;
      for (const c of body.value as Record<string, unknown>[]) {
        this.commands.push({ ...c, id: this.nextSnowflake(), application_id: this.applicationId, version: this.nextSnowflake(), type: 1 } as unknown as RegisteredCommand);
      }
      ctx.body = this.commands;
      return undefined;
    });
    api.get('/applications/:appId/commands', (ctx) => {
      ctx.body = this.commands;
    });
    api.post('/interactions/:id/:token/callback', async (ctx) => {
      const resolve = this.pendingReplies.get(ctx.params['id'] ?? '');
      if (resolve === undefined) return discordError(ctx, 400, 40060, 'Interaction has already been acknowledged.');
      this.pendingReplies.delete(ctx.params['id'] ?? '');
      const body = await readJsonBody(ctx.req);
      resolve(body.ok ? (body.value as InteractionReply) : { type: 0 });
      ctx.status = 204;
      return undefined;
    });
    api.get('/channels/:id', (ctx) => {
      const channel = this.channels.get(ctx.params['id'] ?? '');
      if (channel === undefined) return discordError(ctx, 404, 10003, 'Unknown Channel');
      ctx.body = channel.type === 1 ? { id: channel.id, type: 1, recipients: channel.recipients?.map(publicUser) } : { id: channel.id, type: channel.type, name: channel.name, guild_id: channel.guild_id };
      return undefined;
    });
    api.post('/users/@me/channels', async (ctx) => {
      const body = await readJsonBody(ctx.req);
      const recipient = body.ok ? this.users.get(String((body.value as { recipient_id?: unknown }).recipient_id)) : undefined;
      if (recipient === undefined) return discordError(ctx, 400, 50035, 'Invalid Form Body');
      let channel = [...this.channels.values()].find((c) => c.type === 1 && c.recipients?.[0]?.id === recipient.id);
      if (channel === undefined) {
        channel = { id: this.nextSnowflake(), type: 1, recipients: [recipient] };
        this.addChannel(channel);
      }
      ctx.body = { id: channel.id, type: 1, recipients: [publicUser(recipient)] };
      return undefined;
    });
    api.get('/channels/:id/messages', (ctx) => {
      const list = this.messages.get(ctx.params['id'] ?? '');
      if (list === undefined) return discordError(ctx, 404, 10003, 'Unknown Channel');
      const limit = Math.min(100, Math.max(1, Number(ctx.query['limit'] ?? 50)));
      const snowflake = (name: string): bigint | undefined | null => {
        const v = ctx.query[name];
        if (v === undefined) return undefined;
        return typeof v === 'string' && /^[0-9]{1,20}$/.test(v) ? BigInt(v) : null;
      };
      const after = snowflake('after');
      const before = snowflake('before');
      if (after === null || before === null) return discordError(ctx, 400, 50035, 'Invalid Form Body: after and before must be snowflakes');
      let selected = list.filter((m) => (after === undefined || BigInt(m.id) > after) && (before === undefined || BigInt(m.id) < before));
      // Discord answers newest first; with `after`, the oldest page after it.
      selected = after !== undefined ? selected.slice(0, limit) : selected.slice(-limit);
      ctx.body = selected.reverse().map(listedMessage);
      return undefined;
    });
    api.post('/channels/:id/messages', async (ctx) => {
      const channel = this.channels.get(ctx.params['id'] ?? '');
      if (channel === undefined) return discordError(ctx, 404, 10003, 'Unknown Channel');
      const parsed = await readJsonBody(ctx.req);
      if (!parsed.ok) return discordError(ctx, 400, 50109, 'The request body contains invalid JSON.');
      const body = parsed.value as Record<string, unknown>;
      const problem = checkMessage(body);
      if (problem !== undefined) return discordError(ctx, 400, 50035, problem);
      if (channel.type === 1) {
        const recipient = channel.recipients?.[0];
        if (recipient?.dms_closed) return discordError(ctx, 403, 50007, 'Cannot send messages to this user');
      }
      const nonce = body['nonce'] as string | number | undefined;
      const key = nonce !== undefined && body['enforce_nonce'] === true ? `${channel.id}:${this.bot.id}:${String(nonce)}` : undefined;
      const existing = key !== undefined ? this.nonces.get(key) : undefined;
      if (existing !== undefined && Date.now() - existing.at <= this.options.nonceWindowMs) {
        const message = this.channelMessages(channel.id).find((m) => m.id === existing.messageId);
        if (message !== undefined) {
          ctx.body = createdMessage(message);
          return undefined;
        }
      }
      const message: SandboxMessage = {
        id: this.nextSnowflake(),
        channel_id: channel.id,
        author: this.bot,
        content: typeof body['content'] === 'string' ? body['content'] : '',
        embeds: Array.isArray(body['embeds']) ? body['embeds'] : [],
        components: Array.isArray(body['components']) ? body['components'] : [],
        timestamp: new Date().toISOString(),
        edited_timestamp: null,
        type: 0,
        ...(nonce !== undefined ? { nonce } : {}),
        ...(body['allowed_mentions'] !== undefined ? { allowed_mentions: body['allowed_mentions'] } : {}),
        edits: 0,
      };
      this.messages.get(channel.id)?.push(message);
      if (key !== undefined) this.nonces.set(key, { messageId: message.id, at: Date.now() });
      // Discord reports every new message to the gateway, the bot's own with the nonce it was sent with.
      this.gateway?.dispatch('MESSAGE_CREATE', { ...createdMessage(message), ...(channel.guild_id !== undefined ? { guild_id: channel.guild_id } : {}) });
      const fault = ctx.state['fault'] as Fault | undefined;
      if (fault?.action === 'drop_after_create') {
        ctx.respond = false;
        ctx.req.socket.destroy();
        return undefined;
      }
      if (fault?.action === 'delay_after_create') await sleep(fault.ms ?? 1_000);
      if (fault?.action === 'error_after_create') return discordError(ctx, fault.status ?? 500, fault.code ?? 0, 'Internal Server Error');
      ctx.body = createdMessage(message);
      return undefined;
    });
    api.patch('/channels/:id/messages/:messageId', async (ctx) => {
      const message = this.channelMessages(ctx.params['id'] ?? '').find((m) => m.id === ctx.params['messageId']);
      if (message === undefined) return discordError(ctx, 404, 10008, 'Unknown Message');
      const parsed = await readJsonBody(ctx.req);
      if (!parsed.ok) return discordError(ctx, 400, 50109, 'The request body contains invalid JSON.');
      const body = parsed.value as Record<string, unknown>;
      if (typeof body['content'] === 'string') message.content = body['content'];
      if (Array.isArray(body['embeds'])) message.embeds = body['embeds'];
      if (Array.isArray(body['components'])) message.components = body['components'];
      if (body['allowed_mentions'] !== undefined) message.allowed_mentions = body['allowed_mentions'];
      message.edited_timestamp = new Date().toISOString();
      message.edits += 1;
      ctx.body = listedMessage(message);
      return undefined;
    });
    app.use(router.routes()).use(api.routes());
  }

  private takeFault(method: string, path: string): Fault | undefined {
    const index = this.faults.findIndex((f) => (f.method === undefined || f.method.toUpperCase() === method) && (f.path === undefined || new RegExp(f.path).test(path)));
    if (index < 0) return undefined;
    const fault = this.faults[index];
    if (fault === undefined) return undefined;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.faults.splice(index, 1);
    return fault;
  }

  /** Discord-style buckets: per route and channel, plus an optional global limit. */
  private rateLimit(ctx: Context, path: string): boolean {
    const now = Date.now();
    const global = this.options.globalLimit;
    if (global !== undefined) {
      if (now - this.globalBucket.start >= global.windowMs) Object.assign(this.globalBucket, { start: now, count: 0 });
      if (this.globalBucket.count >= global.limit) {
        ctx.set('X-RateLimit-Global', 'true');
        return rateLimited(ctx, (this.globalBucket.start + global.windowMs - now) / 1000, 'global');
      }
      this.globalBucket.count += 1;
    }
    const rule = this.options.routeLimit;
    const route = `${ctx.method} ${path.replace(/\/messages\/[0-9]+/, '/messages/:id')}`;
    let bucket = this.buckets.get(route);
    if (bucket === undefined || now - bucket.start >= rule.windowMs) {
      bucket = { start: now, count: 0 };
      this.buckets.set(route, bucket);
    }
    const resetAfter = (bucket.start + rule.windowMs - now) / 1000;
    ctx.set('X-RateLimit-Limit', String(rule.limit));
    ctx.set('X-RateLimit-Reset', String((bucket.start + rule.windowMs) / 1000));
    ctx.set('X-RateLimit-Reset-After', resetAfter.toFixed(3));
    ctx.set('X-RateLimit-Bucket', Buffer.from(route).toString('base64url').slice(0, 32));
    if (bucket.count >= rule.limit) {
      ctx.set('X-RateLimit-Remaining', '0');
      return rateLimited(ctx, resetAfter, 'user');
    }
    bucket.count += 1;
    ctx.set('X-RateLimit-Remaining', String(rule.limit - bucket.count));
    return true;
  }
}

export class SandboxError extends Error {}

const FAULT_ACTIONS: readonly string[] = ['error', 'delay', 'drop_after_create', 'delay_after_create', 'error_after_create'];

/** Why a fault posted to the control API cannot be injected, if it cannot. */
function faultProblem(f: Record<string, unknown>): string | undefined {
  if (Array.isArray(f)) return 'expected a fault object';
  if (typeof f['action'] !== 'string' || !FAULT_ACTIONS.includes(f['action'])) return `action must be one of ${FAULT_ACTIONS.join(', ')}`;
  if (f['method'] !== undefined && (typeof f['method'] !== 'string' || !/^[A-Za-z]{1,10}$/.test(f['method']))) return 'method must be an HTTP method';
  if (f['path'] !== undefined) {
    if (typeof f['path'] !== 'string' || f['path'].length > 200) return 'path must be a regular expression of at most 200 characters';
    try {
      new RegExp(f['path']);
    } catch {
      return 'path is not a valid regular expression';
    }
  }
  for (const key of ['status', 'code', 'ms', 'times'] as const) {
    const v = f[key];
    if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 600_000)) return `${key} must be an integer from 0 to 600000`;
  }
  if (f['status'] !== undefined && ((f['status'] as number) < 100 || (f['status'] as number) > 599)) return 'status must be an HTTP status';
  return undefined;
}

const SNOWFLAKE = /^[0-9]{1,25}$/;
/** Discord's rule for command, subcommand and option names. */
const NAME = /^[-_a-z0-9]{1,32}$/;
const INVOCATION_SHAPE = 'a JSON object {"userId","command","subcommand"?,"options"?,"guildId"?,"channelId"?,"permissions"?}';

/** What is wrong with an option value for an option of this registered type, if anything. */
function optionProblem(type: number, value: unknown): string | undefined {
  switch (type) {
    case 4: // integer
      return Number.isSafeInteger(value) ? undefined : 'must be an integer';
    case 10: // number
      return typeof value === 'number' && Number.isFinite(value) ? undefined : 'must be a number';
    case 5: // boolean
      return typeof value === 'boolean' ? undefined : 'must be true or false';
    case 6: // user
    case 7: // channel
    case 8: // role
    case 9: // mentionable
      return typeof value === 'string' && SNOWFLAKE.test(value) ? undefined : 'must be a snowflake (a string of digits)';
    default: // string
      return typeof value === 'string' && value.length <= 6000 ? undefined : 'must be a string of at most 6000 characters';
  }
}

function controlError(ctx: Context, status: number, error: string): void {
  ctx.status = status;
  ctx.body = { error };
}

function checkMessage(body: Record<string, unknown>): string | undefined {
  const content = body['content'];
  const embeds = body['embeds'];
  const components = body['components'];
  if (content !== undefined && (typeof content !== 'string' || content.length > 2000)) return 'content: Must be 2000 or fewer in length.';
  const hasContent = typeof content === 'string' && content.length > 0;
  if (!hasContent && !(Array.isArray(embeds) && embeds.length > 0) && !(Array.isArray(components) && components.length > 0)) return 'Cannot send an empty message';
  const nonce = body['nonce'];
  if (typeof nonce === 'string' && nonce.length > 25) return 'nonce: Must be 25 or fewer in length.';
  return undefined;
}

function publicUser(u: SandboxUser): Record<string, unknown> {
  return { id: u.id, username: u.username, global_name: u.global_name, discriminator: '0', avatar: null, ...(u.bot ? { bot: true } : {}) };
}

function listedMessage(m: SandboxMessage): Record<string, unknown> {
  return {
    id: m.id,
    channel_id: m.channel_id,
    author: publicUser(m.author),
    content: m.content,
    embeds: m.embeds,
    components: m.components,
    timestamp: m.timestamp,
    edited_timestamp: m.edited_timestamp,
    type: 0,
    tts: false,
    mention_everyone: false,
    mentions: [],
    mention_roles: [],
    attachments: [],
    pinned: false,
  };
}

function createdMessage(m: SandboxMessage): Record<string, unknown> {
  return { ...listedMessage(m), ...(m.nonce !== undefined ? { nonce: m.nonce } : {}) };
}

/** https://discord.com/developers/docs/topics/rate-limits#exceeding-a-rate-limit */
function rateLimited(ctx: Context, retryAfterSeconds: number, scope: 'global' | 'user'): false {
  ctx.set('X-RateLimit-Scope', scope);
  ctx.set('Retry-After', String(Math.ceil(retryAfterSeconds)));
  ctx.status = 429;
  ctx.body = { message: 'You are being rate limited.', retry_after: retryAfterSeconds, global: scope === 'global' };
  return false;
}

function discordError(ctx: Context, status: number, code: number, message: string): void {
  ctx.status = status;
  ctx.body = { message, code };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
