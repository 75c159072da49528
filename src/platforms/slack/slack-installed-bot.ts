import type Router from '@koa/router';
import { LogLevel, WebClient } from '@slack/web-api';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { errorSummary } from '../../infra/errors.js';
import { StartupError } from '../../infra/startup.js';
import type { PlatformServices } from '../plugin.js';
import { TransportError, type Platform } from '../platform.js';
import { SealedSecretError } from './credentials.js';
import type { SlackConfig } from './settings.js';
import { SILENT } from './slack-client.js';
import { INSTALL_PATH, installRoutes } from './slack-install.js';
import { SlackInstallations, WorkspaceUnknownError, type InstalledWorkspace, type RefreshedTokens, type SlackInstallDb } from './slack-installations.js';
import type { SlackPlatform } from './slack-platform.js';

// The bots of the identities `name=install` of HERALD_SLACK_IDENTITIES: each speaks with the token
// its install left in the store (slack-installations.ts), read again while it speaks, refreshed
// when Slack's token rotation is on, and stopped when Slack says the app was uninstalled.

/** One workspace's bot: its Web API facets (Socket Mode aside), and whether Slack refused its token. */
export interface Speaker {
  readonly transport: SlackPlatform;
  readonly facets: Platform;
  readiness(): Record<string, string>;
}

/**
 * An installed bot's token is read from the store again this often while it is used, so a
 * re-install (another workspace, a new token) or an uninstall on any replica reaches every replica.
 */
const INSTALL_REREAD_MS = 5_000;
/**
 * With Slack's token rotation (access tokens expire, 12 h on Slack), a token is refreshed once half
 * its life has passed, by one replica at a time: it holds the refresh this long (the next try, if
 * it failed, comes after it).
 */
const REFRESH_LEASE_MS = 30_000;
/** The longest expiry Herald believes of a refreshed token (Slack's: 12 h); a shorter or absurd one is held to 1 s..31 days. */
const MAX_TOKEN_LIFE_S = 31 * 24 * 3600;

/** Facet methods answered at once, from the facet's own code (checks of an argument's shape): no bot needed. */
const SYNC_METHODS = new Set(['check', 'checkSender', 'checkChannel', 'checkText']);

/**
 * The bot of an identity `name=install`: until the app is installed in its workspace, every send
 * fails (`rejected`: UPSTREAM_UNAVAILABLE, saying so) and /readyz says `slack_install: not
 * installed` under its name; the first use after any replica installed it reads the token from the
 * store and speaks with it from then on, without a restart.
 */
export class InstalledBot implements Speaker {
  readonly transport: SlackPlatform;
  readonly facets: Platform;
  /** The installed bot, and the token it speaks with (a new install, or a refresh, brings another). */
  private bot: { speaker: Speaker; token: string } | undefined;
  /** When the store was last read (performance.now(), which starts near 0 with the process: never read is -Infinity). */
  private readAt = -Infinity;
  /** When the token it speaks with is due for a refresh (wall clock, ms; Infinity: it does not expire). */
  private dueAt = Infinity;
  /** Why the last read gave no bot, when not "not installed": the row does not open. */
  private problem: string | undefined;
  private reading: Promise<Speaker> | undefined;
  /** Moved on by reread(): a read begun before it keeps nothing it read. */
  private generation = 0;

  constructor(
    private readonly name: string,
    private readonly installations: SlackInstallations,
    private readonly make: (token: string) => Speaker,
    /** The facets' shapes until installed (never called). */
    template: Speaker,
    /** Slack's token rotation: trade a refresh token for new tokens (oauth.v2.access, grant_type=refresh_token). */
    private readonly rotation: { refresh(refreshToken: string): Promise<RefreshedTokens>; now(): Date; log: Logger; leaseMs: number },
  ) {
    this.transport = template.transport;
    const deferred = <T extends object>(facet: T, pick: (p: Platform) => T | undefined): T =>
      new Proxy(facet, {
        get: (target, prop, receiver) => {
          const value: unknown = Reflect.get(target, prop, receiver);
          if (typeof value !== 'function' || SYNC_METHODS.has(String(prop))) return value;
          return async (...args: unknown[]) => {
            const real = pick((await this.current()).facets) as Record<PropertyKey, unknown> | undefined;
            const method = real?.[prop];
            if (typeof method !== 'function') throw new TransportError({ kind: 'rejected', detail: `slack ${String(prop)} is not available to identity ${this.name}` });
            return (method as (...a: unknown[]) => unknown).apply(real, args);
          };
        },
      });
    const t = template.facets;
    this.facets = {
      ...t,
      ...Object.fromEntries((['sender', 'dms', 'editor', 'reactions', 'deleter', 'threading', 'keyed', 'channels', 'members', 'chat'] as const).flatMap((k) => {
        const facet = t[k];
        return facet === undefined ? [] : [[k, deferred(facet as object, (p) => p[k] as object | undefined)]];
      })),
      messageUrl: (scope, channelId, ts) => (this.bot?.speaker ?? template).facets.messageUrl(scope, channelId, ts),
    };
  }

  /**
   * The installed bot: read from the store until it is there, and again every INSTALL_REREAD_MS.
   * A new install of the identity (its `installed_at` moved: another workspace, a new token)
   * replaces the bot; an uninstalled one (no row) stops it. A store that cannot be read keeps the
   * bot it knows.
   */
  current(): Promise<Speaker> {
    const fresh = performance.now() - this.readAt < INSTALL_REREAD_MS && this.rotation.now().getTime() < this.dueAt;
    if (this.bot !== undefined && fresh) return Promise.resolve(this.bot.speaker);
    if (this.reading === undefined) {
      const reading: Promise<Speaker> = this.read().finally(() => {
        if (this.reading === reading) this.reading = undefined;
      });
      this.reading = reading;
    }
    return this.reading;
  }

  /** One read of the store (current() shares it among its callers). */
  private async read(): Promise<Speaker> {
    const generation = this.generation;
    let found: InstalledWorkspace | undefined;
    try {
      found = await this.installations.find(this.name);
      // Half its life gone (Slack's token rotation): refreshed first, by this replica or another.
      if (found !== undefined && this.due(found) && (await this.rotate())) found = await this.installations.find(this.name);
      // Begun before reread() was asked (an install or an uninstall since): what it read is not kept.
      if (generation !== this.generation) return await this.current();
    } catch (err) {
      if (err instanceof SealedSecretError) {
        this.bot = undefined;
        this.problem = 'its sealed token does not open (HERALD_CREDENTIALS_KEY is not the one it was sealed with): install it again, or restore the key';
        throw new TransportError({ kind: 'rejected', detail: `identity ${this.name}'s Slack installation: ${this.problem}` });
      }
      // The store did not answer: the bot it knows speaks on meanwhile.
      if (this.bot !== undefined) return this.bot.speaker;
      throw new TransportError({ kind: 'transient', detail: `could not read identity ${this.name}'s Slack installation (${errorSummary(err)})` });
    }
    this.readAt = performance.now();
    this.problem = undefined;
    if (found === undefined) {
      this.bot = undefined;
      const revoked = await this.installations.revokedAt(this.name).catch(() => undefined);
      if (revoked !== undefined) this.problem = `uninstalled (Slack said so at ${revoked.toISOString()}): install it again`;
      const why = revoked !== undefined ? 'was uninstalled' : 'is not installed yet';
      throw new TransportError({ kind: 'rejected', detail: `the Slack workspace of identity ${this.name} ${why}: install the app there from Herald (GET ${INSTALL_PATH}?identity=${this.name}, admin token)` });
    }
    if (this.bot?.token !== found.token) this.bot = { speaker: this.make(found.token), token: found.token };
    // Still due (another replica is refreshing it, or Slack did not): read again in INSTALL_REREAD_MS, not on every send.
    this.dueAt = this.due(found) ? this.rotation.now().getTime() + INSTALL_REREAD_MS : this.halfLife(found);
    return this.bot.speaker;
  }

  /** Whether an expiring token (Slack's token rotation) has lived half its life. */
  private due(found: InstalledWorkspace): boolean {
    return this.rotation.now().getTime() >= this.halfLife(found);
  }

  /** When half an expiring token's life is over (ms); Infinity for a token that does not expire. */
  private halfLife(found: InstalledWorkspace): number {
    if (found.expiresAt === undefined || found.issuedAt === undefined) return Infinity;
    return found.issuedAt.getTime() + (found.expiresAt.getTime() - found.issuedAt.getTime()) / 2;
  }

  /**
   * Refresh the token, unless another replica is refreshing it now: true when this one did. A
   * failed refresh is tried again once its lease is over (the token works until it expires). A
   * refresh Slack answered but the store did not keep spent the refresh token: the identity must be
   * installed again once its token expires, and the log says so.
   */
  private async rotate(): Promise<boolean> {
    const { log } = this.rotation;
    const taken = await this.installations.takeRefresh(this.name, this.rotation.leaseMs).catch((err: unknown) => {
      log.warn({ identity: this.name, err: errorSummary(err) }, 'could not take the refresh of a Slack token; its bot speaks with the one it has');
      return undefined;
    });
    if (taken === undefined) return false;
    let tokens: RefreshedTokens;
    try {
      tokens = await this.rotation.refresh(taken.refreshToken);
    } catch (err) {
      log.warn({ identity: this.name, err: errorSummary(err) }, 'Slack did not refresh the token; tried again in 30 s');
      return false;
    }
    try {
      if (!(await this.installations.refreshed(this.name, taken, tokens, this.rotation.now()))) {
        log.warn({ identity: this.name }, 'a Slack token refresh ended after the identity was installed again or uninstalled: its tokens are not kept');
        return true;
      }
    } catch (err) {
      log.error({ identity: this.name, err: errorSummary(err) }, 'Slack refreshed the token but the store did not keep it: install the identity again before its token expires');
      return false;
    }
    log.info({ identity: this.name, expires_at: tokens.expiresAt.toISOString() }, 'Slack token rotated');
    return true;
  }

  /** Read the store now (this replica installed it): the next use speaks with the new token. */
  reread(): Promise<Speaker> {
    // At once: no send from now on speaks with what was read before the change, nor joins a read
    // begun before it (that read's result is dropped, generation).
    this.generation += 1;
    this.readAt = -Infinity;
    this.reading = undefined;
    return this.current();
  }

  readiness(): Record<string, string> {
    // Read again when stale (another replica may have installed it, or heard it uninstalled): the next probe says what it found.
    this.current().catch(() => undefined);
    if (this.bot !== undefined) return this.bot.speaker.readiness();
    return { slack_install: this.problem ?? 'not installed' };
  }
}


/** What startInstalls needs from startSlack (slack.plugin.ts). */
export interface InstallsOptions {
  readonly config: SlackConfig;
  readonly services: PlatformServices;
  readonly log: Logger;
  /** The identities declared `name=install`. */
  readonly installs: readonly string[];
  /** SLACK_BOT_TOKEN's bot, and the bots of the tokens Herald was given (env/file). */
  readonly main: Speaker;
  readonly tokened: readonly { name: string; bot: Speaker }[];
  /** A bot for a token (its pacers, its facets), named for the log. */
  make(token: string, name: string): Speaker;
  /** The facets' shapes before a bot is installed. */
  readonly template: Speaker;
  /** At most this long to ask Slack which workspace a token is for. */
  readonly tokenCheckMs: number;
}

/**
 * The install identities' bots, the install routes, and what to do when Slack says the app left a
 * workspace. Needs SLACK_CLIENT_ID, SLACK_CLIENT_SECRET and HERALD_CREDENTIALS_KEY.
 */
export function startInstalls(o: InstallsOptions): { bots: { name: string; bot: InstalledBot }[]; routes: Router[]; onUninstalled(team: string, event: string, at: Date | undefined): void } {
  const { config, services, log, installs, main } = o;
  const { clientId, clientSecret, credentialsKey } = config;
  if (clientId === undefined || clientSecret === undefined || credentialsKey === undefined) throw new StartupError(`HERALD_SLACK_IDENTITIES installs ${installs.join(', ')} from Herald: set SLACK_CLIENT_ID, SLACK_CLIENT_SECRET and HERALD_CREDENTIALS_KEY`);
  const store = new SlackInstallations(services.db as Kysely<SlackInstallDb>, credentialsKey);
  // Slack's token rotation, where the app has it on: a refresh token traded for new tokens.
  const oauth = new WebClient(undefined, { slackApiUrl: config.apiUrl, timeout: config.timeoutMs, retryConfig: { retries: 0 }, logger: SILENT, logLevel: LogLevel.ERROR });
  const refresh = async (refreshToken: string): Promise<RefreshedTokens> => {
    const r = await oauth.oauth.v2.access({ client_id: clientId, client_secret: clientSecret, grant_type: 'refresh_token', refresh_token: refreshToken });
    if (r.access_token === undefined || r.refresh_token === undefined || r.expires_in === undefined) throw new Error('Slack answered a token refresh without the tokens');
    // The tokens are good (and the refresh token spent) whatever it says of their life: held to a sane one.
    const lifeS = Number.isFinite(r.expires_in) ? Math.min(MAX_TOKEN_LIFE_S, Math.max(1, r.expires_in)) : MAX_TOKEN_LIFE_S;
    return { botToken: r.access_token, refreshToken: r.refresh_token, expiresAt: new Date(services.clock.now().getTime() + lifeS * 1000) };
  };
  // The refresh's lease outlives the slowest refresh Slack may take (HERALD_SLACK_TIMEOUT_MS).
  const rotation = { refresh, now: () => services.clock.now(), log, leaseMs: Math.max(REFRESH_LEASE_MS, 2 * config.timeoutMs) };
  const bots = installs.map((name) => ({ name, bot: new InstalledBot(name, store, (token) => o.make(token, name), o.template, rotation) }));
  // Which workspace a token is for, as Slack says; a token Slack cannot be asked about stops the
  // install (WorkspaceUnknownError, "try again"): unknown is not free.
  const teamOf = async (bot: Speaker, what: string): Promise<string | undefined> =>
    bot.transport.identity(AbortSignal.timeout(Math.min(config.timeoutMs, o.tokenCheckMs))).then(
      (me) => me.teamId,
      (err: unknown) => {
        throw new WorkspaceUnknownError(what, { cause: err });
      },
    );
  const routes = [
    installRoutes({
      adminGate: (authorization, address) => services.adminGate(authorization, address),
      clientId,
      clientSecret,
      apiUrl: config.apiUrl,
      timeoutMs: config.timeoutMs,
      installations: store,
      installable: installs,
      // The workspaces of the tokens Herald was given (SLACK_BOT_TOKEN's, env/file ones'): an install there would be a second identity for one workspace.
      tokenOwnerOf: async (team) => {
        if ((await teamOf(main, 'SLACK_BOT_TOKEN')) === team) return 'SLACK_BOT_TOKEN';
        for (const t of o.tokened) if ((await teamOf(t.bot, `identity ${t.name}`)) === team) return t.name;
        return undefined;
      },
      // This replica speaks with the new token at once; the others within INSTALL_REREAD_MS.
      installed: (identity) => void bots.find((b) => b.name === identity)?.bot.reread().catch(() => undefined),
      log,
      now: () => services.clock.now(),
    }),
  ];
  // Slack says the app left a workspace: an installed identity there is revoked (every replica's
  // bot for it stops within INSTALL_REREAD_MS); a token Herald was given fails on its next use.
  const onUninstalled = (team: string, event: string, at: Date | undefined): void => {
    log.warn({ team, event }, 'Slack says the app was uninstalled from a workspace (or its bot token revoked)');
    store.revokeTeam(team, services.clock.now(), at).then(
      (names) => {
        for (const name of names) {
          log.warn({ identity: name, team }, 'Slack install revoked: the identity speaks no more until installed again');
          void bots.find((b) => b.name === name)?.bot.reread().catch(() => undefined);
        }
      },
      (err: unknown) => log.error({ err: errorSummary(err), team }, 'could not record a Slack uninstall; the identity fails on its next send instead'),
    );
  };
  return { bots, routes, onUninstalled };
}
