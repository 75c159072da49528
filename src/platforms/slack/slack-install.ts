import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import Router from '@koa/router';
import type { Context } from 'koa';
import type { PlatformServices } from '../plugin.js';
import { InstallProvider, type CodedError, type Installation } from '@slack/oauth';
import { LogLevel } from '@slack/web-api';
import type { Logger } from 'pino';
import { errorSummary } from '../../infra/errors.js';
import { SILENT } from './slack-client.js';
import { BOT_SCOPES, hashOf, NotInstallableError, STATE_MS, WorkspaceTakenError, WorkspaceUnknownError, type SlackInstallations } from './slack-installations.js';

// Slack's OAuth v2 install, for the identities `name=install` of HERALD_SLACK_IDENTITIES: an
// operator starts it (admin token), the person installing picks the workspace on Slack, and Slack
// sends them back with a code that @slack/oauth's InstallProvider checks (state and cookie) and
// trades for the workspace's bot token (oauth.v2.access). Herald keeps the token sealed in its
// database (slack-installations.ts), where every replica reads it.

/** Where Slack sends the person back. */
export const REDIRECT_PATH = '/slack/oauth_redirect';
export const INSTALL_PATH = '/slack/install';
/** The longest code or state the redirect takes (Slack's are far shorter). */
const MAX_PARAM = 512;
/** What a Slack code or state (and Herald's state) is made of: printable ASCII. */
const PRINTABLE = /^[\x21-\x7e]*$/;
/** The installer's binder cookie: set when an install starts, required when it finishes. */
const BINDER_COOKIE = 'herald-slack-install';

export interface InstallRoutesOptions {
  /** Whether a request carries the admin token (PlatformServices.adminGate). */
  adminGate: PlatformServices['adminGate'];
  readonly clientId: string;
  readonly clientSecret: string;
  /** Base of Slack's Web API (oauth.v2.access, auth.test), ending with `/`. */
  readonly apiUrl: string;
  readonly timeoutMs: number;
  readonly installations: SlackInstallations;
  /** The identities declared `name=install`. */
  readonly installable: readonly string[];
  /** Which identity's token (SLACK_BOT_TOKEN's, or one of HERALD_SLACK_IDENTITIES' env/file) is for `team`, if any. */
  tokenOwnerOf(team: string): Promise<string | undefined>;
  /** Told once an identity's workspace is installed (this replica then speaks with it at once). */
  installed(identity: string): void;
  readonly log: Logger;
  readonly now: () => Date;
}

/**
 * Slack's authorize page, derived from the Web API's base: https://slack.com/api/ →
 * https://slack.com/oauth/v2/authorize (the sandbox serves the same path beside its `/api/`).
 */
export function authorizeUrlOf(apiUrl: string): string {
  return new URL('../oauth/v2/authorize', apiUrl).toString();
}

/**
 * `GET /slack/install?identity=<name>` (admin token; a page outside the API's contract):
 * sets the state cookie and redirects to Slack's authorize page. `GET /slack/oauth_redirect`:
 * Slack's redirect back, finished by InstallProvider (state, cookie, oauth.v2.access), answered
 * with a plain page saying which identity now speaks in which workspace, or why nothing was stored.
 */
export function installRoutes(o: InstallRoutesOptions): Router {
  const provider = new InstallProvider({
    clientId: o.clientId,
    clientSecret: o.clientSecret,
    stateStore: o.installations.stateStore(o.now),
    installationStore: {
      storeInstallation: async (installation) => store(o, installation),
      // Herald reads its installations itself (SlackInstallations.find), never through the provider.
      fetchInstallation: () => Promise.reject(new Error('not used: Herald reads installations from its own table')),
    },
    directInstall: true,
    authorizationUrl: authorizeUrlOf(o.apiUrl),
    // Slack's libraries log requests and answers at debug: tokens and secrets never reach Herald's log.
    logger: SILENT,
    logLevel: LogLevel.ERROR,
    clientOptions: { slackApiUrl: o.apiUrl, timeout: o.timeoutMs, retryConfig: { retries: 0 } },
  });
  const router = new Router();
  // Pages for a browser (as the archive UI's), outside the API's contract: each checks its own
  // caller and its own input, and refuses what it cannot take with a 4xx naming the field.
  router.get(INSTALL_PATH, async (ctx) => {
    // The admin token only (the bridge token starts nothing here); a HEAD starts nothing.
    if (ctx.method !== 'GET') return notGet(ctx);
    const gate = o.adminGate(ctx.get('authorization') || undefined, ctx.ip);
    if (!gate.ok) {
      ctx.status = gate.status;
      if (gate.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(gate.retryAfterSeconds));
      ctx.body = { error: `${gate.error}: an install is started with the admin token` };
      return;
    }
    const given = new URL(ctx.url, 'http://herald.invalid').searchParams.getAll('identity');
    const [identity] = given;
    if (given.length !== 1 || identity === undefined || !o.installable.includes(identity)) {
      ctx.status = 400;
      ctx.body = { error: `identity must name an identity declared name=install in HERALD_SLACK_IDENTITIES (${o.installable.join(', ') || 'none is'}), once` };
      return;
    }
    const redirectUri = `${ctx.protocol}://${ctx.host}${REDIRECT_PATH}`;
    // The binder: a secret of this browser's, in a cookie no URL carries (the state is in Slack's
    // URLs, and @slack/oauth's own cookie holds the state itself). Only its hash is kept, with the state.
    const binder = randomBytes(32).toString('base64url');
    ctx.res.setHeader('Set-Cookie', `${BINDER_COOKIE}=${binder}; Path=${REDIRECT_PATH}; HttpOnly; SameSite=Lax; Max-Age=${STATE_MS / 1000}${ctx.protocol === 'https' ? '; Secure' : ''}`);
    ctx.respond = false;
    try {
      await provider.handleInstallPath(ctx.req, ctx.res, undefined, { scopes: BOT_SCOPES, redirectUri, metadata: JSON.stringify({ identity, binderHash: hashOf(binder) }) });
    } catch (err) {
      o.log.error({ err: errorSummary(err), identity }, 'could not start a Slack install');
      plain(ctx.res, 503, 'Herald could not start the install (its store did not answer); try again.');
    }
  });
  router.get(REDIRECT_PATH, async (ctx) => {
    // A HEAD finishes nothing (it would trade the code and keep the token).
    if (ctx.method !== 'GET') return notGet(ctx);
    ctx.respond = false;
    // Finished only by the browser that started it: a state seen elsewhere (a shared link, a
    // history) with a cookie written by hand does not carry the binder.
    // Read as @slack/oauth reads it (the first `state`); more than one is refused outright.
    const query = new URL(ctx.url, 'http://herald.invalid').searchParams;
    const states = query.getAll('state');
    for (const field of ['state', 'code']) {
      const values = query.getAll(field);
      const problem = values.length > 1 ? 'is given more than once' : values.some((v) => v.length > MAX_PARAM) ? `is longer than ${MAX_PARAM} characters` : values.some((v) => !PRINTABLE.test(v)) ? 'holds a character no Slack code or state has' : undefined;
      if (problem !== undefined) {
        plain(ctx.res, 400, `Refused: ${field} ${problem}. Nothing was stored; start the install again from Herald.`);
        return;
      }
    }
    const [state] = states;
    if (state !== undefined && !(await o.installations.boundTo(state, ctx.cookies.get(BINDER_COOKIE)))) {
      o.log.warn('Slack install refused: finished by another browser than the one that started it');
      plain(ctx.res, 400, "Refused: this install was started in another browser (its binder cookie is missing or not this install's). Nothing was stored; start the install again from Herald.");
      return;
    }
    await provider.handleCallback(ctx.req, ctx.res, {
      success: (installation) => {
        const identity = String(installation.metadata ?? '');
        o.log.info({ identity, team: installation.team?.id }, 'Slack app installed');
        plain(ctx.res, 200, `Installed: identity ${identity} now speaks in the Slack workspace ${installation.team?.name ?? ''} (${installation.team?.id ?? ''}) as its bot ${installation.bot?.userId ?? ''}.`);
      },
      failure: (error) => {
        const { status, text } = refusal(error);
        o.log.warn({ err: errorSummary(error), code: error.code, status }, 'Slack install refused');
        plain(ctx.res, status, text);
      },
    });
  });
  // Any other method: refused, saying which it takes.
  for (const path of [INSTALL_PATH, REDIRECT_PATH]) router.all(path, notGet);
  return router;
}

/** A method other than GET: 405, saying which it takes. */
function notGet(ctx: Context): void {
  ctx.status = 405;
  ctx.set('Allow', 'GET');
  ctx.body = { error: `${ctx.path} takes GET only` };
}

/** The provider's installation, kept as the identity's (the state's metadata names it). */
async function store(o: InstallRoutesOptions, installation: Installation<'v1' | 'v2', boolean>): Promise<void> {
  const identity = String(installation.metadata ?? '');
  if (!o.installable.includes(identity)) throw new NotInstallableError(identity);
  const team = installation.team?.id;
  const bot = installation.bot;
  if (team === undefined || bot === undefined) throw new Error('Slack answered oauth.v2.access without a workspace or a bot token');
  const owner = await o.tokenOwnerOf(team);
  if (owner !== undefined) throw new WorkspaceTakenError(team, owner);
  await o.installations.store(identity, { teamId: team, enterpriseId: installation.enterprise?.id, botUserId: bot.userId, botToken: bot.token, refreshToken: bot.refreshToken, expiresAt: bot.expiresAt === undefined ? undefined : new Date(bot.expiresAt * 1000) }, o.now());
  o.installed(identity);
}

/** What the person sees when an install stops: nothing was stored. */
function refusal(error: CodedError): { status: number; text: string } {
  const again = 'Nothing was stored; start the install again from Herald.';
  if (error instanceof WorkspaceTakenError) return { status: 409, text: `Refused: ${error.message}. ${again}` };
  if (error instanceof WorkspaceUnknownError) return { status: 503, text: `Not now: ${error.message}. ${again}` };
  if (error instanceof NotInstallableError) return { status: 400, text: `Refused: ${error.message}. ${again}` };
  switch (error.code) {
    case 'slack_oauth_invalid_state':
    case 'slack_oauth_missing_state':
      return { status: 400, text: `Refused: this install's state is missing, unknown, expired or already used, or not this browser's. ${again}` };
    case 'slack_oauth_missing_code':
      return { status: 400, text: `Refused: Slack's redirect carries no code. ${again}` };
    case 'slack_oauth_installer_authorization_error':
      return { status: 403, text: `The install was cancelled on Slack. ${again}` };
    case 'slack_webapi_platform_error': {
      const code = String((error as CodedError & { data?: { error?: unknown } }).data?.error ?? '');
      if (code === 'invalid_code' || code === 'code_already_used' || code === 'bad_redirect_uri') return { status: 400, text: `Refused: Slack did not accept the code (${code}). ${again}` };
      return { status: 502, text: `Slack refused the exchange (${code}): check SLACK_CLIENT_ID and SLACK_CLIENT_SECRET. ${again}` };
    }
    default:
      return { status: 502, text: `Slack could not be asked to finish the install. ${again}` };
  }
}

function plain(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent) return;
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.end(`${text}\n`);
}
