import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Pacer } from '../../infra/db/shared-pacer.js';
import { errorSummary } from '../../infra/errors.js';
import { StartupError } from '../../infra/startup.js';
import type { Singleton } from '../../infra/db/singleton.js';
import { stateOf } from '../singleton-state.js';
import type { RunningPlatform, PlatformServices } from '../plugin.js';
import { TransportError, type Platform } from '../platform.js';
import type { SlackConfig } from './settings.js';
import { slackErrorCode } from './slack-client.js';
import { burstPacerFor, tierOf } from './slack-pacer.js';
import { SlackChat } from './slack-chat.js';
import { SlackSocket } from './slack-socket.js';
import { SlackPlatform } from './slack-platform.js';

/** At most this long to ask Slack whether it accepts the token before starting anyway. */
const TOKEN_CHECK_MS = 10_000;
/** How long start-up waits for Socket Mode to connect before serving without it. */
const SOCKET_START_MS = 15_000;
/** Slack's answers to auth.test that mean the token itself is refused. */
const TOKEN_REFUSED = new Set(['invalid_auth', 'not_authed', 'token_revoked', 'token_expired', 'account_inactive', 'not_allowed_token_type']);

/**
 * A token Slack refuses stops start-up, before the store opens, with a sentence for the operator
 * (exit 2); Slack not answering does not (deliveries wait for it), so that is only logged.
 */
export async function checkToken(config: SlackConfig, log: Logger): Promise<void> {
  const transport = new SlackPlatform({ token: config.botToken, apiUrl: config.apiUrl, timeoutMs: config.timeoutMs });
  try {
    const me = await transport.identity(AbortSignal.timeout(Math.min(config.timeoutMs, TOKEN_CHECK_MS)));
    log.info({ team: me.teamId, bot_user: me.userId }, 'Slack accepted SLACK_BOT_TOKEN');
  } catch (err) {
    const code = slackErrorCode(err);
    if (err instanceof TransportError && code !== undefined && TOKEN_REFUSED.has(code)) {
      log.error({ code }, 'Slack rejected SLACK_BOT_TOKEN');
      throw new StartupError(`Slack rejected SLACK_BOT_TOKEN (${code}): check the bot token (api.slack.com/apps → your app → OAuth & Permissions → Bot User OAuth Token, xoxb-…)`, { cause: err });
    }
    log.warn({ err: errorSummary(err) }, 'could not check SLACK_BOT_TOKEN with Slack; starting anyway');
  }
}

/** Start Slack: Web API facets paced by budgets shared by every process sending as this bot. */
export async function startSlack(config: SlackConfig, services: PlatformServices): Promise<RunningPlatform> {
  const { store } = services;
  const bot = createHash('sha256').update(config.botToken).digest('hex').slice(0, 16);
  const pacers = new Map<string, Pacer>();
  const pacer = (key: string, make: () => Pacer): Pacer => {
    let p = pacers.get(key);
    if (p === undefined) pacers.set(key, (p = make()));
    return p;
  };
  const transport = new SlackPlatform({
    token: config.botToken,
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
  transport.identity(AbortSignal.timeout(Math.min(config.timeoutMs, TOKEN_CHECK_MS))).catch((err: unknown) => services.log.warn({ err: errorSummary(err) }, 'Slack auth.test failed at start; retried on first send'));
  const log = services.log.child({ transport: 'slack' });
  // The chat tools call Slack through the same paced, never-retrying caller as the sends.
  const chat = new SlackChat({ client: transport.api, log, selfId: () => transport.selfId() });
  // Socket Mode (slash commands, messages others write) needs the app-level token; only a serving
  // process connects, once the modules are up.
  const socket = config.appToken !== undefined ? new SlackSocket({ appToken: config.appToken, apiUrl: config.apiUrl, log, client: transport.api }) : undefined;
  const watchSocket = socket !== undefined && services.serving;
  // One Socket Mode connection across the serving replicas, held under the lease `slack:socket`
  // (as Discord's gateway): the holder answers slash commands and reads messages others write.
  let lease: Singleton | undefined;
  if (watchSocket) services.link('socket', () => (lease !== undefined && !lease.held() ? undefined : socket.up));
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
    ...(socket !== undefined ? { inbound: socket } : {}),
    messageUrl: (scope, channelId, ts) => transport.messageUrl(scope, channelId, ts),
  };
  return {
    facets,
    readiness: (): Record<string, string> => {
      if (!watchSocket) return {};
      if (lease !== undefined && !lease.held()) return { slack_socket: stateOf(lease) };
      return { slack_socket: socket.up ? 'ok' : 'unavailable' };
    },
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
