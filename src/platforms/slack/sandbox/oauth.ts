import { randomBytes } from 'node:crypto';
import Router from '@koa/router';
import { escape } from './page.js';
import { SlackApiError, type Params } from './web-api.js';
import type { SlackIds } from './state.js';

/**
 * Slack's OAuth v2 install, as the sandbox plays it: the authorize page a person opens
 * (`GET /oauth/v2/authorize`, https://docs.slack.dev/authentication/installing-with-oauth), which
 * sends them back to the app's redirect URL with a code, and the Web API method the app trades the
 * code for the workspace's bot token with (`oauth.v2.access`). One app (one client id and secret);
 * a code is good once, for ten minutes, as Slack's.
 */

/** How long a code may wait for its exchange (Slack: ten minutes). */
const CODE_MS = 10 * 60_000;

/** A workspace the app may be installed in, as the install sees it. */
export interface Installable {
  readonly ids: SlackIds;
  /** Its bot's token, which oauth.v2.access hands over (and which the Web API answers from then on). */
  readonly botToken: string;
  /** Marks the token handed over. */
  issue(): void;
  /**
   * With token rotation on (the app's setting, per workspace here): a new expiring access token
   * for the bot and a new refresh token, the last refresh token spent. Undefined: rotation off.
   */
  rotate?(): { accessToken: string; refreshToken: string; expiresInS: number };
  /** The refresh token's workspace, spent as it is used (each is good once); undefined: unknown or spent. */
  refreshes?(refreshToken: string): boolean;
}

export interface OAuthOptions {
  readonly clientId: string;
  readonly clientSecret: string;
  /** The workspaces, the first (the sandbox's own) first. */
  workspaces(): readonly Installable[];
}

interface Grant {
  readonly team: string;
  readonly redirectUri: string;
  readonly until: number;
}

export class SandboxOAuth {
  private readonly codes = new Map<string, Grant>();

  constructor(private readonly options: OAuthOptions) {}

  /**
   * The authorize page. With `team` (a workspace's id, as Slack's own `team` parameter preselects
   * one) it answers at once with a redirect carrying a code, so a script (curl) can follow it;
   * without, a page listing the workspaces, each a link to the same URL with its `team`.
   */
  routes(): Router {
    const router = new Router();
    router.get('/oauth/v2/authorize', (ctx) => {
      const q = (name: string): string | undefined => (typeof ctx.query[name] === 'string' ? ctx.query[name] : undefined);
      const refuse = (why: string): void => {
        ctx.status = 400;
        ctx.type = 'text/html; charset=utf-8';
        ctx.body = `<!doctype html><title>Install refused</title><p>${escape(why)}</p>`;
      };
      const redirectUri = q('redirect_uri');
      if (q('client_id') !== this.options.clientId) return refuse('invalid client_id: this is not the sandbox app');
      if (redirectUri === undefined || !/^https?:\/\//.test(redirectUri)) return refuse('redirect_uri must be the app\'s http(s) redirect URL');
      const team = q('team');
      const workspaces = this.options.workspaces();
      if (team === undefined) {
        ctx.type = 'text/html; charset=utf-8';
        const items = workspaces.map((w) => {
          const href = `${ctx.path}?${new URLSearchParams({ ...(ctx.query as Record<string, string>), team: w.ids.team }).toString()}`;
          return `<li><a href="${escape(href)}">Install in ${escape(w.ids.domain)} (${escape(w.ids.team)})</a></li>`;
        });
        ctx.body = `<!doctype html><title>Install the Herald app</title><h1>Install the Herald app</h1><p>Scopes: ${escape(q('scope') ?? '')}</p><ul>${items.join('')}</ul>`;
        return;
      }
      if (!workspaces.some((w) => w.ids.team === team)) return refuse(`no workspace ${team} in this sandbox`);
      const code = `${team}.${randomBytes(16).toString('hex')}`;
      this.codes.set(code, { team, redirectUri, until: Date.now() + CODE_MS });
      const back = new URL(redirectUri);
      back.searchParams.set('code', code);
      const state = q('state');
      if (state !== undefined) back.searchParams.set('state', state);
      ctx.redirect(back.toString());
    });
    return router;
  }

  /**
   * oauth.v2.access (https://docs.slack.dev/reference/methods/oauth.v2.access): the app's client id
   * and secret (form parameters, or HTTP Basic) and a code, once; answers the workspace's bot token.
   */
  access(params: Params, authorization: string): Record<string, unknown> {
    const basic = /^Basic (.+)$/.exec(authorization)?.[1];
    const [basicId, basicSecret] = basic === undefined ? [] : Buffer.from(basic, 'base64').toString('utf8').split(':');
    const clientId = params.str('client_id') ?? basicId;
    const clientSecret = params.str('client_secret') ?? basicSecret;
    if (clientId !== this.options.clientId) throw new SlackApiError('invalid_client_id');
    if (clientSecret !== this.options.clientSecret) throw new SlackApiError('bad_client_secret');
    if (params.str('grant_type') === 'refresh_token') return this.refresh(params.str('refresh_token') ?? '');
    const code = params.str('code') ?? '';
    const grant = this.codes.get(code);
    // Good once: whatever the answer, the code is spent.
    this.codes.delete(code);
    if (grant === undefined || grant.until < Date.now()) throw new SlackApiError('invalid_code');
    const redirectUri = params.str('redirect_uri');
    if (redirectUri !== undefined && redirectUri !== grant.redirectUri) throw new SlackApiError('bad_redirect_uri');
    const workspace = this.options.workspaces().find((w) => w.ids.team === grant.team);
    if (workspace === undefined) throw new SlackApiError('invalid_code');
    workspace.issue();
    const { ids } = workspace;
    const rotated = workspace.rotate?.();
    return {
      app_id: ids.appId,
      authed_user: { id: ids.users.ada },
      scope: SCOPE,
      token_type: 'bot',
      access_token: rotated?.accessToken ?? workspace.botToken,
      ...(rotated !== undefined ? { refresh_token: rotated.refreshToken, expires_in: rotated.expiresInS } : {}),
      bot_user_id: ids.bot.user,
      team: { id: ids.team, name: ids.domain },
      enterprise: null,
      is_enterprise_install: false,
    };
  }

  /** grant_type=refresh_token: a refresh token, once, for a new access token and a new refresh token (Slack's token rotation). */
  private refresh(refreshToken: string): Record<string, unknown> {
    const workspace = this.options.workspaces().find((w) => w.refreshes?.(refreshToken) === true);
    const rotated = workspace?.rotate?.();
    if (workspace === undefined || rotated === undefined) throw new SlackApiError('invalid_refresh_token');
    const { ids } = workspace;
    return {
      app_id: ids.appId,
      scope: SCOPE,
      token_type: 'bot',
      access_token: rotated.accessToken,
      refresh_token: rotated.refreshToken,
      expires_in: rotated.expiresInS,
      bot_user_id: ids.bot.user,
      team: { id: ids.team, name: ids.domain },
      enterprise: null,
      is_enterprise_install: false,
    };
  }
}

const SCOPE = 'chat:write,channels:read,channels:history,channels:join,groups:read,im:write,reactions:write,users:read,commands';
