import { createHash } from 'node:crypto';
import { pino, type Logger } from 'pino';
import type Router from '@koa/router';
import type { Pacer } from '../../infra/db/shared-pacer.js';
import { errorSummary } from '../../infra/errors.js';
import { StartupError } from '../../infra/startup.js';
import { DEFAULT_IDENTITY } from '../../infra/policy/identity.js';
import type { Singleton } from '../../infra/db/singleton.js';
import { stateOf } from '../singleton-state.js';
import type { RunningPlatform, PlatformServices } from '../plugin.js';
import { TransportError, type Platform } from '../platform.js';
import type { TokenIdentity } from '../identity-tokens.js';
import type { SlackConfig } from './settings.js';
import { SILENT, slackErrorCode, TOKEN_REFUSED } from './slack-client.js';
import { burstPacerFor, tierOf } from './slack-pacer.js';
import { SlackChat } from './slack-chat.js';
import { SlackSocket } from './slack-socket.js';
import { SlackPlatform } from './slack-platform.js';
import type { Kysely } from 'kysely';
import { SealedSecretError } from './credentials.js';
import { installRoutes, SlackInstallations, INSTALL_PATH, WorkspaceUnknownError, type InstalledWorkspace, type RefreshedTokens, type SlackInstallDb } from './slack-install.js';
import { LogLevel, WebClient } from '@slack/web-api';

/** At most this long to ask Slack whether it accepts the token before starting anyway. */
const TOKEN_CHECK_MS = 10_000;
/** How long start-up waits for Socket Mode to connect before serving without it. */
const SOCKET_START_MS = 15_000;

/**
 * A token Slack refuses stops start-up, before the store opens, with a sentence for the operator
 * (exit 2); Slack not answering does not (deliveries wait for it), so that is only logged. Each
 * identity's token must be for a workspace of its own: two tokens for one workspace would send as
 * its bot under two names.
 */
export async function checkToken(config: SlackConfig, log: Logger): Promise<void> {
  const teams = new Map<string, string>();
  const own = (teamId: string | undefined, what: string): void => {
    if (teamId === undefined) return;
    const other = teams.get(teamId);
    if (other !== undefined) throw new StartupError(`${what} and ${other} are for the same Slack workspace (team ${teamId}): each identity of HERALD_SLACK_IDENTITIES is a workspace of its own`);
    teams.set(teamId, what);
  };
  own(await checkOne(config, defaultToken(config), undefined, log), 'SLACK_BOT_TOKEN');
  for (const identity of config.identities.filter((i) => i.install !== true)) own(await checkOne(config, identityToken(identity), identity.name, log), `identity ${identity.name}`);
}

/** Slack's word on one token: its workspace's team id, or undefined when Slack could not be asked. */
async function checkOne(config: SlackConfig, token: string, identity: string | undefined, log: Logger): Promise<string | undefined> {
  const transport = new SlackPlatform({ token, apiUrl: config.apiUrl, timeoutMs: config.timeoutMs });
  const what = identity === undefined ? 'SLACK_BOT_TOKEN' : `identity ${identity}'s token (HERALD_SLACK_IDENTITIES)`;
  const named = identity !== undefined ? { identity } : {};
  try {
    const me = await transport.identity(AbortSignal.timeout(Math.min(config.timeoutMs, TOKEN_CHECK_MS)));
    log.info({ team: me.teamId, bot_user: me.userId, ...named }, `Slack accepted ${what}`);
    return me.teamId;
  } catch (err) {
    const code = slackErrorCode(err);
    if (err instanceof TransportError && code !== undefined && TOKEN_REFUSED.has(code)) {
      log.error({ code, ...named }, `Slack rejected ${what}`);
      throw new StartupError(`Slack rejected ${what} (${code}): check the bot token (api.slack.com/apps → your app → OAuth & Permissions → Bot User OAuth Token, xoxb-…)`, { cause: err });
    }
    log.warn({ err: errorSummary(err), ...named }, `could not check ${what} with Slack; starting anyway`);
    return undefined;
  }
}

/** SLACK_BOT_TOKEN; unset only where sandbox mode was to make the workspaces (the settings then only name them). */
function defaultToken(config: SlackConfig): string {
  if (config.botToken === undefined) throw new StartupError('HERALD_SLACK_IDENTITIES names workspaces for sandbox mode (bare names), but Herald is not in sandbox mode: set SLACK_BOT_TOKEN and give each identity its bot token (name=env:VARIABLE or name=file:/path)');
  return config.botToken;
}

function identityToken(identity: TokenIdentity): string {
  if (identity.token === undefined) throw new StartupError(`identity ${identity.name} has no Slack bot token (HERALD_SLACK_IDENTITIES)`);
  return identity.token;
}

/**
 * Start Slack: SLACK_BOT_TOKEN's workspace (the identity `default`) and each of
 * HERALD_SLACK_IDENTITIES', each bot with Web API facets paced by budgets of its own, shared by
 * every process sending as it. Socket Mode (slash commands, messages others write) is the default's.
 */
export async function startSlack(config: SlackConfig, services: PlatformServices): Promise<RunningPlatform> {
  const log = services.log.child({ transport: 'slack' });
  const main = speaker(config, defaultToken(config), services, log);
  const tokened = config.identities.filter((i) => i.install !== true);
  const others: { name: string; bot: Speaker }[] = tokened.map((identity) => ({ name: identity.name, bot: speaker(config, identityToken(identity), services, log.child({ identity: identity.name })) }));
  // Identities `name=install`: their bot speaks once the app is installed in their workspace from
  // Herald (slack-install.ts), with the token read from the store, on whichever replica installed it.
  const installs = config.identities.filter((i) => i.install === true).map((i) => i.name);
  let routes: Router[] = [];
  let installations: SlackInstallations | undefined;
  let pending: { name: string; bot: InstalledBot }[] = [];
  if (installs.length > 0) {
    const { clientId, clientSecret, credentialsKey } = config;
    if (clientId === undefined || clientSecret === undefined || credentialsKey === undefined) throw new StartupError(`HERALD_SLACK_IDENTITIES installs ${installs.join(', ')} from Herald: set SLACK_CLIENT_ID, SLACK_CLIENT_SECRET and HERALD_CREDENTIALS_KEY`);
    const store = new SlackInstallations(services.db as Kysely<SlackInstallDb>, credentialsKey);
    installations = store;
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
    pending = installs.map((name) => ({ name, bot: new InstalledBot(name, store, (token) => speaker(config, token, services, log.child({ identity: name })), rotation) }));
    others.push(...pending);
    // Which workspace a token is for, as Slack says; a token Slack cannot be asked about stops the
    // install (WorkspaceUnknownError, "try again"): unknown is not free.
    const teamOf = async (bot: Speaker, what: string): Promise<string | undefined> =>
      bot.transport.identity(AbortSignal.timeout(Math.min(config.timeoutMs, TOKEN_CHECK_MS))).then(
        (me) => me.teamId,
        (err: unknown) => {
          throw new WorkspaceUnknownError(what, { cause: err });
        },
      );
    routes = [
      installRoutes({
        clientId,
        clientSecret,
        apiUrl: config.apiUrl,
        timeoutMs: config.timeoutMs,
        installations: store,
        installable: installs,
        // The workspaces of the tokens Herald was given (SLACK_BOT_TOKEN's, env/file ones'): an install there would be a second identity for one workspace.
        tokenOwnerOf: async (team) => {
          if ((await teamOf(main, 'SLACK_BOT_TOKEN')) === team) return 'SLACK_BOT_TOKEN';
          for (const o of others) if (!(o.bot instanceof InstalledBot) && (await teamOf(o.bot, `identity ${o.name}`)) === team) return o.name;
          return undefined;
        },
        // This replica speaks with the new token at once; the others within INSTALL_REREAD_MS.
        installed: (identity) => void pending.find((p) => p.name === identity)?.bot.reread().catch(() => undefined),
        log,
        now: () => services.clock.now(),
      }),
    ];
  }
  // Socket Mode (slash commands, messages others write) needs the app-level token; only a serving
  // process connects, once the modules are up. It hears the default's workspace.
  // It also hears Slack say the app left a workspace: an installed identity there is revoked (every
  // replica's bot for it stops within INSTALL_REREAD_MS); a token Herald was given fails on its next use.
  const onUninstalled = (team: string, event: string, at: Date | undefined): void => {
    log.warn({ team, event }, 'Slack says the app was uninstalled from a workspace (or its bot token revoked)');
    installations?.revokeTeam(team, services.clock.now(), at).then(
      (names) => {
        for (const name of names) {
          log.warn({ identity: name, team }, 'Slack install revoked: the identity speaks no more until installed again');
          void pending.find((p) => p.name === name)?.bot.reread().catch(() => undefined);
        }
      },
      (err: unknown) => log.error({ err: errorSummary(err), team }, 'could not record a Slack uninstall; the identity fails on its next send instead'),
    );
  };
  const socket = config.appToken !== undefined ? new SlackSocket({ appToken: config.appToken, apiUrl: config.apiUrl, log, client: main.transport.api, onUninstalled }) : undefined;
  const watchSocket = socket !== undefined && services.serving;
  // One Socket Mode connection across the serving replicas, held under the lease `slack:socket`
  // (as Discord's gateway): the holder answers slash commands and reads messages others write.
  let lease: Singleton | undefined;
  if (watchSocket) services.link('socket', () => (lease !== undefined && !lease.held() ? undefined : socket.up));
  const facets: Platform = { ...main.facets, ...(socket !== undefined ? { inbound: socket } : {}) };
  return {
    facets,
    identities: new Map(others.map((o) => [o.name, o.bot.facets])),
    // The default bot's token is not among them: a replica whose Slack token was revoked still
    // serves every other platform, so it stays ready (its Slack deliveries fail, saying why).
    readiness: (): Record<string, string> => {
      if (!watchSocket) return {};
      if (lease !== undefined && !lease.held()) return { slack_socket: stateOf(lease) };
      return { slack_socket: socket.up ? 'ok' : 'unavailable' };
    },
    // Each other workspace's bot, under its identity's name, once Slack refused its token: it
    // sends nothing until restarted with a valid one, and leaves the replica ready for the others.
    routes,
    // The default bot's own refused token is here too, under `default`: /readyz and the status
    // page say it, and the replica stays ready for every other platform.
    identityReadiness: () => Object.fromEntries([{ name: DEFAULT_IDENTITY, bot: main }, ...others].flatMap((o) => (Object.keys(o.bot.readiness()).length > 0 ? [[o.name, o.bot.readiness()]] : []))),
    async serve(surfaces) {
      if (!watchSocket) return;
      const commands = surfaces.commands ?? { definitions: [], run: async (invocation) => `Unknown command /${invocation.name}.` };
      const failed = (err: unknown) => log.error({ err: errorSummary(err) }, 'Slack Socket Mode unavailable; slash commands will not be answered');
      let startFailed = false;
      lease = services.singleton('slack:socket', {
        onAcquired: () => {
          log.info('holding the Slack Socket Mode connection; connecting');
          socket.serve(commands).catch((err: unknown) => {
            startFailed = true;
            failed(err);
          });
        },
        onLost: () => {
          log.warn('lost the Slack Socket Mode lease; closing the connection');
          return socket.stop();
        },
        // Not connected for HERALD_SINGLETON_DOWN_MS (Slack cannot be reached from here): another replica may do better.
        up: () => socket.up,
      });
      // Deliveries do not need Socket Mode: start-up waits a while for the lease to be settled and
      // the holder's connection up, then goes on serving, and /readyz says whether it is up.
      const deadline = performance.now() + SOCKET_START_MS;
      const settled = (): boolean => (lease?.held() === true ? socket.up : lease?.holder() !== undefined);
      while (!settled() && !startFailed && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      if (!settled() && !startFailed) log.warn({ waited_ms: SOCKET_START_MS }, 'Slack Socket Mode not connected yet; serving without it meanwhile');
    },
    async close() {
      // Web API calls are each their own request; only the Socket Mode connection is held open.
      // It is closed before the lease is given up, so another replica's never overlaps it.
      await socket?.close();
      await lease?.close();
    },
  };
}

/** One workspace's bot: its Web API facets (Socket Mode aside), and whether Slack refused its token. */
interface Speaker {
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
class InstalledBot implements Speaker {
  readonly transport: SlackPlatform;
  readonly facets: Platform;
  /** The installed bot, and the token it speaks with (a new install, or a refresh, brings another). */
  private bot: { speaker: Speaker; token: string } | undefined;
  /** When the store was last read (performance.now()). */
  private readAt = 0;
  /** When the token it speaks with is due for a refresh (wall clock, ms; Infinity: it does not expire). */
  private dueAt = Infinity;
  /** Why the last read gave no bot, when not "not installed": the row does not open. */
  private problem: string | undefined;
  private reading: Promise<Speaker> | undefined;

  constructor(
    private readonly name: string,
    private readonly installations: SlackInstallations,
    private readonly make: (token: string) => Speaker,
    /** Slack's token rotation: trade a refresh token for new tokens (oauth.v2.access, grant_type=refresh_token). */
    private readonly rotation: { refresh(refreshToken: string): Promise<RefreshedTokens>; now(): Date; log: Logger; leaseMs: number },
  ) {
    // A stand-in for the shapes of the facets (never called: its token is no token).
    const template = facetsOf(new SlackPlatform({ token: 'xoxb-not-installed', apiUrl: 'http://127.0.0.1:9/', timeoutMs: 1 }), undefined);
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
    this.reading ??= this.read().finally(() => (this.reading = undefined));
    return this.reading;
  }

  /** One read of the store (current() shares it among its callers). */
  private async read(): Promise<Speaker> {
    let found: InstalledWorkspace | undefined;
    try {
      found = await this.installations.find(this.name);
      // Half its life gone (Slack's token rotation): refreshed first, by this replica or another.
      if (found !== undefined && this.due(found) && (await this.rotate())) found = await this.installations.find(this.name);
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
  async reread(): Promise<Speaker> {
    // A read under way began before the change: a new one after it.
    await this.reading?.catch(() => undefined);
    this.readAt = 0;
    return this.current();
  }

  readiness(): Record<string, string> {
    // Read again when stale (another replica may have installed it, or heard it uninstalled): the next probe says what it found.
    this.current().catch(() => undefined);
    if (this.bot !== undefined) return this.bot.speaker.readiness();
    return { slack_install: this.problem ?? 'not installed' };
  }
}

function speaker(config: SlackConfig, token: string, services: PlatformServices, log: Logger): Speaker {
  const { store } = services;
  const bot = createHash('sha256').update(token).digest('hex').slice(0, 16);
  const pacers = new Map<string, Pacer>();
  const pacer = (key: string, make: () => Pacer): Pacer => {
    let p = pacers.get(key);
    if (p === undefined) pacers.set(key, (p = make()));
    return p;
  };
  const transport = new SlackPlatform({
    token,
    apiUrl: config.apiUrl,
    timeoutMs: config.timeoutMs,
    // chat.postMessage: about one message per second per channel; every other method: its tier's
    // budget per workspace. Both are shared through the database by every process using this bot.
    pace: async (method, args, signal) => {
      const channel = typeof args['channel'] === 'string' ? args['channel'] : undefined;
      if (method === 'chat.postMessage' && channel !== undefined) {
        const key = `slack:${bot}:post:${channel}`;
        // A twentieth under the rate: posts spaced exactly one second apart would land in one of
        // Slack's one-second windows whenever the network delays the first more than the second.
        return pacer(key, () => burstPacerFor({ kind: store.kind, db: services.db }, key, { perSecond: config.postsPerSecond * 0.95, burst: 1 })).acquire(signal);
      }
      const { budget } = tierOf(method);
      const key = `slack:${bot}:${method}`;
      return pacer(key, () => burstPacerFor({ kind: store.kind, db: services.db }, key, budget)).acquire(signal);
    },
  });
  // Learn the workspace url (for permalinks) now; a send asks again if Slack did not answer.
  transport.identity(AbortSignal.timeout(Math.min(config.timeoutMs, TOKEN_CHECK_MS))).catch((err: unknown) => log.warn({ err: errorSummary(err) }, 'Slack auth.test failed at start; retried on first send'));
  return facetsOf(transport, log);
}

/** A bot's facets over its Web API caller (`log` undefined: a stand-in that never speaks). */
function facetsOf(transport: SlackPlatform, log: Logger | undefined): Speaker {
  // The chat tools call Slack through the same paced, never-retrying caller as the sends.
  const chat = new SlackChat({ client: transport.api, log: log ?? pino({ level: 'silent' }), selfId: () => transport.selfId() });
  const facets: Platform = {
    name: transport.name,
    title: transport.title,
    idempotentSend: transport.idempotentSend,
    sender: transport.sender,
    dms: transport.dms,
    editor: transport.editor,
    reactions: transport.reactions,
    deleter: transport.deleter,
    threading: transport.threading,
    keyed: transport.keyed,
    channels: transport.channels,
    members: transport.members,
    chat,
    messageUrl: (scope, channelId, ts) => transport.messageUrl(scope, channelId, ts),
  };
  return {
    transport,
    facets,
    // Only once Slack refused the token: this bot sends nothing until restarted with a valid one.
    readiness: () => {
      const refused = transport.api.tokenRefused;
      return refused !== undefined ? { slack_token: `rejected by Slack (${refused})` } : {};
    },
  };
}
