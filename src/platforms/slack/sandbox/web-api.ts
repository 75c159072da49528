import Router from '@koa/router';
import type { Context } from 'koa';
import getRawBody from 'raw-body';
import type { FaultQueue, RateLimits } from './limits.js';
import { SLACK_SANDBOX_IDS, type SlackConversation, type SlackMessage, type SlackUser, type SlackWorkspace } from './state.js';

/**
 * Slack's Web API over HTTP: `POST /api/<method>` with the token as `Authorization: Bearer …`
 * (or a `token` parameter), parameters form-encoded (as @slack/web-api sends them, nested values
 * JSON-encoded strings), as JSON, or in the query string. Every answer is HTTP 200 with
 * `{"ok":true,…}` or `{"ok":false,"error":"…"}`, except a rate limit (429 with Retry-After) and
 * injected 5xx faults. The methods themselves are in chat.ts and conversations.ts.
 * https://docs.slack.dev/apis/web-api/
 */

/** Slack's error code for a call, answered `{"ok":false,"error":code}`. */
export class SlackApiError extends Error {
  constructor(readonly code: string) {
    super(code);
  }
}

/** A call's parameters, whatever way they were sent, read the way Slack reads them. */
export class Params {
  constructor(private readonly values: Record<string, unknown>) {}

  has(name: string): boolean {
    const v = this.values[name];
    return v !== undefined && v !== null && v !== '';
  }
  str(name: string): string | undefined {
    const v = this.values[name];
    if (v === undefined || v === null) return undefined;
    return typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);
  }
  /** A required parameter; Slack answers a missing one with this error (e.g. channel_not_found). */
  need(name: string, error: string): string {
    const v = this.str(name);
    if (v === undefined || v === '') throw new SlackApiError(error);
    return v;
  }
  bool(name: string): boolean {
    const v = this.values[name];
    return v === true || v === 1 || v === 'true' || v === '1';
  }
  int(name: string, fallback: number): number {
    const v = Number(this.str(name));
    return Number.isFinite(v) && this.has(name) ? Math.trunc(v) : fallback;
  }
  /** An object parameter: sent as JSON text (form) or as an object (JSON body); `error` otherwise. */
  object(name: string, error: string): Record<string, unknown> | undefined {
    const v = this.values[name];
    if (v === undefined || v === null || v === '') return undefined;
    let value: unknown = v;
    if (typeof v === 'string') {
      try {
        value = JSON.parse(v) as unknown;
      } catch {
        throw new SlackApiError(error);
      }
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new SlackApiError(error);
    return value as Record<string, unknown>;
  }
}

export interface ApiCall {
  params: Params;
  /** The user the token belongs to (the bot user for the bot token). */
  caller: SlackUser;
  ctx: Context;
}

/** A method's answer (merged into `{"ok":true}`); undefined when it answered itself (a dropped connection). */
export type Handler = (call: ApiCall) => Record<string, unknown> | undefined | Promise<Record<string, unknown> | undefined>;

/** A workspace the app is installed in: its state and the methods its bot token is answered with. */
export interface Installed {
  workspace: SlackWorkspace;
  methods: Record<string, Handler>;
}

export interface WebApiOptions {
  /** The workspace a bot token was issued for (each installation's bot has its own); undefined: no such token. */
  installed: (botToken: string) => Installed | undefined;
  /** Whether a token was revoked (its workspace uninstalled the app): answered token_revoked. */
  revoked: (token: string) => boolean;
  /** Whether a rotating token's twelve hours (here: its lifetime) are over: answered token_expired. */
  expired?: (token: string) => boolean;
  appToken: string;
  faults: FaultQueue;
  limits: RateLimits;
  /** Calls received per method, and the 429s answered. */
  counts: { calls: Map<string, number>; ratelimited: number };
  /** apps.connections.open: the WebSocket URL of a new Socket Mode connection, at `origin` (where the app reached the API). */
  openConnection: (origin: string | undefined) => string;
  /** Methods called with no token, which check credentials of their own (oauth.v2.access: the app's client id and secret). */
  unauthenticated?: Readonly<Record<string, (params: Params, ctx: Context) => Record<string, unknown>>>;
}

const MAX_BODY_BYTES = 1_048_576;

export function webApiRoutes(options: WebApiOptions): Router {
  const { installed, appToken, faults, limits, counts } = options;
  const api = new Router({ prefix: '/api' });
  const handle = async (ctx: Context): Promise<void> => {
    const method = ctx.params['method'] ?? '';
    counts.calls.set(method, (counts.calls.get(method) ?? 0) + 1);
    const values = await readParams(ctx);
    if (values === undefined) return;
    const params = new Params(values);
    ctx.set('Content-Type', 'application/json; charset=utf-8');
    const fault = faults.take(method);
    if (fault?.kind === 'fail') {
      ctx.status = fault.status;
      ctx.body = { ok: false, error: 'internal_error' };
      return;
    }
    if (fault?.kind === 'ratelimit') return rateLimited(ctx, counts, fault.retryAfter);
    const open = options.unauthenticated?.[method];
    if (open !== undefined) {
      try {
        return answer(ctx, { ok: true, ...open(params, ctx) });
      } catch (err) {
        if (!(err instanceof SlackApiError)) throw err;
        return answer(ctx, { ok: false, error: err.code });
      }
    }
    const authorization = ctx.get('authorization');
    const token = authorization.startsWith('Bearer ') ? authorization.slice('Bearer '.length) : params.str('token');
    if (token === undefined || token === '') return answer(ctx, { ok: false, error: 'not_authed' });
    if (options.revoked(token)) return answer(ctx, { ok: false, error: 'token_revoked' });
    if (options.expired?.(token) === true) return answer(ctx, { ok: false, error: 'token_expired' });
    const install = token === appToken ? undefined : installed(token);
    if (token !== appToken && install === undefined) return answer(ctx, { ok: false, error: 'invalid_auth' });
    // An app-level token opens Socket Mode connections and nothing else; a bot token cannot open them.
    if ((token === appToken) !== (method === 'apps.connections.open')) return answer(ctx, { ok: false, error: 'not_allowed_token_type' });
    if (install === undefined) {
      answer(ctx, { ok: true, url: options.openConnection(ctx.host !== '' ? `${ctx.protocol}://${ctx.host}` : undefined) });
      return;
    }
    const { workspace, methods } = install;
    const handler = methods[method];
    if (handler === undefined) return answer(ctx, { ok: false, error: 'unknown_method' });
    // Rate limits are per workspace, as Slack's: chat.postMessage per channel (ids are unique), the tiers per team.
    const wait = limits.admit(method, method === 'chat.postMessage' ? workspace.find(params.str('channel') ?? '')?.id : undefined, workspace.ids.team);
    if (wait !== undefined) return rateLimited(ctx, counts, wait);
    const caller = workspace.users.get(workspace.ids.bot.user);
    if (caller === undefined) throw new Error('the sandbox workspace has no bot user');
    try {
      const result = await handler({ params, caller, ctx });
      if (result !== undefined) answer(ctx, { ok: true, ...result });
    } catch (err) {
      if (!(err instanceof SlackApiError)) throw err;
      answer(ctx, { ok: false, error: err.code });
    }
  };
  api.post('/:method', handle);
  api.get('/:method', handle);
  return api;
}

function answer(ctx: Context, body: Record<string, unknown>): void {
  ctx.status = 200;
  ctx.body = body;
}

function rateLimited(ctx: Context, counts: { ratelimited: number }, retryAfterSeconds: number): void {
  counts.ratelimited += 1;
  ctx.status = 429;
  ctx.set('Retry-After', String(retryAfterSeconds));
  ctx.body = { ok: false, error: 'ratelimited' };
}

/** The query string and the body (form-encoded or JSON) together; undefined when answered already (a bad body). */
async function readParams(ctx: Context): Promise<Record<string, unknown> | undefined> {
  const values: Record<string, unknown> = { ...ctx.query };
  if (ctx.method !== 'POST') return values;
  let text: string;
  try {
    text = await getRawBody(ctx.req, { limit: MAX_BODY_BYTES, encoding: 'utf-8' });
  } catch {
    ctx.status = 413;
    ctx.set('Connection', 'close');
    ctx.body = { ok: false, error: 'request_too_large' };
    return undefined;
  }
  if (text === '') return values;
  if (ctx.is('application/json') === 'application/json') {
    try {
      const parsed = JSON.parse(text) as unknown;
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return { ...values, ...(parsed as Record<string, unknown>) };
    } catch {
      // Falls through to Slack's answer for a body it cannot read.
    }
    answer(ctx, { ok: false, error: 'invalid_json' });
    return undefined;
  }
  for (const [key, value] of new URLSearchParams(text)) values[key] = value;
  return values;
}

/** A user as users.info and friends answer it. */
export function userObject(user: SlackUser, team: string): Record<string, unknown> {
  return {
    id: user.id,
    team_id: team,
    name: user.name,
    real_name: user.real_name,
    deleted: false,
    is_admin: user.is_admin,
    is_owner: user.is_admin,
    is_bot: user.is_bot,
    is_app_user: false,
    tz: 'Etc/UTC',
    profile: { real_name: user.real_name, display_name: user.name, ...(user.bot_id === undefined ? {} : { bot_id: user.bot_id }), team },
  };
}

/** A conversation as conversations.info/list answer it, seen by `viewer`. */
export function conversationObject(c: SlackConversation, viewer: string): Record<string, unknown> {
  if (c.kind === 'im') return { id: c.id, created: c.created, is_im: true, is_org_shared: false, user: c.user, is_user_deleted: false, priority: 0 };
  return {
    id: c.id,
    name: c.name,
    name_normalized: c.name,
    is_channel: c.kind === 'public',
    is_group: c.kind === 'private',
    is_im: false,
    is_mpim: c.kind === 'mpim',
    is_private: c.kind !== 'public',
    is_archived: false,
    is_general: c.name === 'general',
    is_shared: false,
    is_org_shared: false,
    is_member: c.members.includes(viewer),
    created: c.created,
    creator: c.creator,
    topic: { value: '', creator: '', last_set: 0 },
    purpose: { value: '', creator: '', last_set: 0 },
    num_members: c.members.length,
  };
}

/** A message as the Web API answers it; its metadata only when asked for. */
export function messageObject(m: SlackMessage, team: string, withMetadata: boolean): Record<string, unknown> {
  const { metadata, ...rest } = m;
  return {
    type: 'message',
    // The bot's messages carry its app; under a custom username Slack marks them bot_message.
    ...(m.bot_id !== undefined && m.username !== undefined ? { subtype: 'bot_message' } : {}),
    ...(m.bot_id === undefined ? {} : { app_id: SLACK_SANDBOX_IDS.appId /* one app, installed in each workspace */ }),
    ...rest,
    team,
    ...(withMetadata && metadata !== undefined ? { metadata } : {}),
  };
}
