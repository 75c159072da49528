import { randomBytes } from 'node:crypto';
import Router from '@koa/router';
import type { Context } from 'koa';
import { readJsonBody } from '../../../infra/http/body.js';
import { faultProblem, type Fault, type Faults } from './faults.js';
import { SANDBOX_PAGE } from './page.js';
import { publicUser, type RegisteredCommand, type SandboxState, type SandboxUser } from './state.js';

/**
 * The sandbox's own side, which Discord does not have: the sandbox page, the control API under
 * /sandbox/api (the world's state, fault injection, slash commands invoked as a user), and the
 * interactions it starts: INTERACTION_CREATE dispatched to the bot, its callback awaited.
 */

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
  /** The bot whose command it is (its application; the sandbox's other bots, addBot). Default: Herald's own. */
  botId?: string | undefined;
}

/** What the bot answered an interaction with. */
export interface InteractionReply {
  type: number;
  data?: { content?: string; flags?: number };
}

export class SandboxError extends Error {}

export interface InteractionsOptions {
  state: SandboxState;
  /** Gateway sessions one bot has identified right now. */
  sessions: (botId: string) => number;
  /** Send a dispatch event to one bot's gateway sessions. */
  dispatch: (botId: string, type: string, data: unknown) => void;
}

/** Interactions sent to the bot and not answered yet. */
export class Interactions {
  private readonly pendingReplies = new Map<string, (reply: InteractionReply) => void>();

  constructor(private readonly options: InteractionsOptions) {}

  /**
   * Act as a user invoking a slash command: dispatch INTERACTION_CREATE to the bot's gateway
   * sessions and wait for its reply (the interaction callback).
   */
  async invoke(invocation: Invocation, timeoutMs = 10_000): Promise<InteractionReply> {
    const { state } = this.options;
    const user = state.users.get(invocation.userId);
    if (user === undefined) throw new SandboxError(`unknown user ${invocation.userId}`);
    const botId = invocation.botId ?? state.applicationId;
    const command = commandsOf(state, botId).find((c) => c.name === invocation.command);
    if (command === undefined) throw new SandboxError(`/${invocation.command} is not registered with this application`);
    if (this.options.sessions(botId) === 0) throw new SandboxError('the bot is not connected to the gateway');
    const interaction = this.payload(invocation, user, command, botId);
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
    this.options.dispatch(botId, 'INTERACTION_CREATE', interaction);
    return reply;
  }

  /** The callback that answers a pending interaction, which is no longer pending; undefined when it is not pending. */
  take(id: string): ((reply: InteractionReply) => void) | undefined {
    const resolve = this.pendingReplies.get(id);
    if (resolve !== undefined) this.pendingReplies.delete(id);
    return resolve;
  }

  private payload(inv: Invocation, user: SandboxUser, command: RegisteredCommand, botId: string): Record<string, unknown> {
    const { state } = this.options;
    const sub = command.options?.find((o) => o.type === 1 && o.name === inv.subcommand);
    const resolvedChannels: Record<string, unknown> = {};
    const values = Object.entries(inv.options ?? {}).map(([name, value]) => {
      const type = sub?.options?.find((o) => o.name === name)?.type ?? 3;
      if (type === 7) {
        const ch = state.channels.get(String(value));
        resolvedChannels[String(value)] = { id: String(value), name: ch?.name ?? 'unknown', type: ch?.type ?? 0, permissions: '0', ...(ch?.guild_id ? { guild_id: ch.guild_id } : {}) };
      }
      return { name, type, value: type === 7 ? String(value) : value };
    });
    const options = inv.subcommand !== undefined ? [{ type: 1, name: inv.subcommand, options: values }] : values;
    const guildId = inv.guildId;
    const channelId = inv.channelId ?? (guildId !== undefined ? [...state.channels.values()].find((c) => c.guild_id === guildId && c.type === 0)?.id : undefined) ?? state.nextSnowflake();
    const base = {
      id: state.nextSnowflake(),
      application_id: botId,
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
      channel: { id: channelId, type: 0, guild_id: guildId, name: state.channels.get(channelId)?.name ?? 'channel' },
      member: { user: publicUser(user), roles: [], permissions: inv.permissions ?? '0', joined_at: new Date(0).toISOString(), deaf: false, mute: false, flags: 0 },
      context: 0,
      authorizing_integration_owners: { '0': guildId },
    };
  }
}

/** A destination Herald has mapped to a channel, as the sandbox page shows it. */
export interface MappedDestination {
  guild_id: string;
  destination: string;
  channel_id: string;
}

export interface ControlOptions {
  state: SandboxState;
  faults: Faults;
  interactions: Interactions;
  /** Herald's destination mappings, when the sandbox runs beside Herald (sandbox mode). */
  destinations?: (() => Promise<MappedDestination[] | null>) | undefined;
}

/** The sandbox page and the /sandbox/api control routes. */
export function controlRoutes({ state, faults, interactions, destinations }: ControlOptions): Router {
  const router = new Router();
  router.get('/', (ctx) => ctx.redirect('/sandbox'));
  router.get('/sandbox', (ctx) => {
    ctx.type = 'html';
    ctx.body = SANDBOX_PAGE;
  });
  // A message link, as Discord's web app has it (https://discord.com/channels/{guild or @me}/{channel}/{message}):
  // the same path here opens that message on the sandbox page.
  router.get('/channels/:scope/:channelId/:messageId', (ctx) => {
    const { channelId = '', messageId = '' } = ctx.params;
    if (state.findMessage(channelId, messageId) === undefined) {
      ctx.status = 404;
      ctx.type = 'text/plain; charset=utf-8';
      ctx.body = 'No such message in this sandbox.';
      return;
    }
    ctx.redirect(`/sandbox#m-${messageId}`);
  });
  router.get('/sandbox/api/state', async (ctx) => {
    ctx.body = {
      destinations: destinations === undefined ? null : await destinations().catch(() => null),
      guilds: [...state.guilds.values()].map((g) => ({
        ...g,
        channels: [...state.channels.values()].filter((c) => c.guild_id === g.id).map((c) => ({ id: c.id, name: c.name, type: c.type, ...(c.parent_id !== undefined ? { parent_id: c.parent_id } : {}) })),
      })),
      dm_channels: [...state.channels.values()].filter((c) => c.type === 1).map((c) => ({ id: c.id, recipients: c.recipients?.map((u) => u.id), ...(c.dm_bot !== undefined ? { bot: c.dm_bot } : {}) })),
      users: [...state.users.values()],
      messages: state.allMessages(),
      deleted: state.deleted,
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
    faults.inject(body.value as Fault);
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
    const inv = parseInvocation(body.value, state);
    if (typeof inv === 'string') return controlError(ctx, 400, inv);
    try {
      ctx.body = await interactions.invoke(inv);
    } catch (err) {
      if (!(err instanceof SandboxError)) throw err;
      return controlError(ctx, 409, err.message);
    }
    return undefined;
  });
  router.delete('/sandbox/api/faults', (ctx) => {
    faults.clear();
    ctx.status = 204;
  });
  return router;
}

const SNOWFLAKE = /^[0-9]{1,25}$/;
/** Discord's rule for command, subcommand and option names. */
const NAME = /^[-_a-z0-9]{1,32}$/;
const INVOCATION_SHAPE = 'a JSON object {"userId","command","subcommand"?,"options"?,"guildId"?,"channelId"?,"permissions"?,"botId"?}';

/** The commands registered with a bot's application (Herald's own bot's, or another bot's). */
function commandsOf(state: SandboxState, botId: string): readonly RegisteredCommand[] {
  return botId === state.applicationId ? state.commands : (state.otherCommands.get(botId) ?? []);
}

/**
 * The control route's input as an Invocation, or what is wrong with it. Everything that ends up
 * in the INTERACTION_CREATE payload is checked: the bot's Discord library trusts the gateway.
 */
function parseInvocation(value: unknown, state: SandboxState): Invocation | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `expected ${INVOCATION_SHAPE}`;
  const v = value as Record<string, unknown>;
  const botId = v['botId'];
  if (botId !== undefined && botId !== null && (typeof botId !== 'string' || !SNOWFLAKE.test(botId) || state.users.get(botId)?.bot !== true)) return 'botId must be the id of a bot in this sandbox';
  const commands = commandsOf(state, typeof botId === 'string' ? botId : state.applicationId);
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
    const registered = commands.find((c) => c.name === v['command'])?.options?.find((o) => o.type === 1 && o.name === subcommand)?.options;
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
    botId: text(botId),
  };
}

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
