import { createHash } from 'node:crypto';
import { pino, type Logger } from 'pino';
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
import { slackErrorCode, TOKEN_REFUSED } from './slack-client.js';
import { burstPacerFor, tierOf } from './slack-pacer.js';
import { SlackChat } from './slack-chat.js';
import { SlackSocket } from './slack-socket.js';
import { SlackPlatform } from './slack-platform.js';
import { startInstalls, type Speaker } from './slack-installed-bot.js';

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
  const installed =
    installs.length > 0
      ? startInstalls({
          config,
          services,
          log,
          installs,
          main,
          tokened: [...others],
          make: (token, name) => speaker(config, token, services, log.child({ identity: name })),
          // A stand-in for the shapes of the facets until installed (never called: its token is no token).
          template: facetsOf(new SlackPlatform({ token: 'xoxb-not-installed', apiUrl: 'http://127.0.0.1:9/', timeoutMs: 1 }), undefined),
          tokenCheckMs: TOKEN_CHECK_MS,
        })
      : undefined;
  others.push(...(installed?.bots ?? []));
  // Socket Mode (slash commands, messages others write) needs the app-level token; only a serving
  // process connects, once the modules are up. It hears the default's workspace.
  // It also hears Slack say the app left a workspace (installed identities are revoked there).
  const socket = config.appToken !== undefined ? new SlackSocket({ appToken: config.appToken, apiUrl: config.apiUrl, log, client: main.transport.api, onUninstalled: installed?.onUninstalled }) : undefined;
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
    routes: installed?.routes ?? [],
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
