import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { pacerFor, type Pacer } from '../../infra/db/shared-pacer.js';
import { errorSummary } from '../../infra/errors.js';
import { StartupError } from '../../infra/startup.js';
import { discordTokenRejected } from './discord-token.js';
import type { Singleton } from '../../infra/db/singleton.js';
import type { CommandSurface, RunningPlatform, Surfaces, PlatformServices } from '../plugin.js';
import { stateOf } from '../singleton-state.js';
import type { Channels, Inbound, Platform } from '../platform.js';
import { DiscordTokenRejectedError, DiscordPlatform } from './discord-platform.js';
import { PlatformMetrics } from './discord.metrics.js';
import type { DiscordConfig, DiscordIdentity } from './settings.js';
import { connectGateway, GatewayInbound, type GatewayConnection } from './gateway-client.js';
import { DiscordInvokers } from './invokers.js';
import { heldHistory } from './discord-inbound-history.js';

/** Discord's global rate limit: requests per second per bot. */
const DISCORD_GLOBAL_LIMIT = 50;
/** At most this long to ask Discord whether it accepts the token before starting anyway. */
const TOKEN_CHECK_MS = 10_000;

  // A token Discord rejects stops start-up, before the store opens; Discord not answering does not
  // (deliveries wait for it), so that is only logged.
export async function checkToken(config: DiscordConfig, log: Logger): Promise<void> {
  // Each identity must be a bot of its own: two tokens of one bot would send as it under two names.
  const bots = new Map<string, string>();
  const own = (botId: string | undefined, what: string): void => {
    if (botId === undefined) return;
    const other = bots.get(botId);
    if (other !== undefined) throw new StartupError(`${what} and ${other} are the same Discord bot (user ${botId}): each identity of HERALD_DISCORD_IDENTITIES is a bot of its own`);
    bots.set(botId, what);
  };
  own(await checkOne(config, tokenOf(config), undefined, log), 'DISCORD_TOKEN');
  for (const identity of config.identities) own(await checkOne(config, identityToken(identity), identity.name, log), `identity ${identity.name}`);
}

/** Discord's word on one token: the bot's user id, or undefined when Discord could not be asked. */
async function checkOne(config: DiscordConfig, token: string, identity: string | undefined, log: Logger): Promise<string | undefined> {
  const transport = new DiscordPlatform({ token, apiUrl: config.apiUrl, timeoutMs: config.timeoutMs });
  const what = identity === undefined ? 'DISCORD_TOKEN' : `identity ${identity}'s token (HERALD_DISCORD_IDENTITIES)`;
  try {
    return await transport.verifyToken(AbortSignal.timeout(Math.min(config.timeoutMs, TOKEN_CHECK_MS)));
  } catch (err) {
    if (err instanceof DiscordTokenRejectedError) {
      log.error({ status: err.status, code: err.code, ...(identity !== undefined ? { identity } : {}) }, `Discord rejected ${what}`);
      throw discordTokenRejected(err.status, err, what);
    }
    log.warn({ err: errorSummary(err), ...(identity !== undefined ? { identity } : {}) }, `could not check ${what} with Discord; starting anyway`);
    return undefined;
  }
}

function identityToken(identity: DiscordIdentity): string {
  if (identity.token === undefined) throw new Error(`identity ${identity.name} has no bot token (HERALD_DISCORD_IDENTITIES)`);
  return identity.token;
}

/**
 * Start Discord: DISCORD_TOKEN's bot (the identity `default`) and each of HERALD_DISCORD_IDENTITIES,
 * each with REST facets paced by its own shared budget and its own gateway session under its own
 * lease. Messages others write in channels come through the default bot's session, and its slash
 * commands; each other bot registers and answers `/agent` (a person registers with each bot that
 * may reach them), and hears the DMs written to it.
 */
export async function startDiscord(config: DiscordConfig, services: PlatformServices): Promise<RunningPlatform> {
  const metrics = PlatformMetrics.create(services.registry);
  const main = startBot(config, tokenOf(config), services, metrics, undefined);
  const others = config.identities.map((identity) => ({ name: identity.name, bot: startBot(config, identityToken(identity), services, metrics.as(identity.name), identity.name) }));
  return {
    facets: main.facets,
    identities: new Map(others.map((o) => [o.name, o.bot.facets])),
    readiness: () => main.readiness(),
    // Each other bot's gateway, under its own name: a bot whose token Discord revoked is reported,
    // and leaves the replica ready for the others.
    // (A bot with nothing to check, no gateway here and its token not refused, is left out.)
    identityReadiness: () =>
      Object.fromEntries(
        others.flatMap((o) => {
          const checks = Object.entries(o.bot.readiness()).map(([check, state]) => [check.replace(`:${o.name}`, ''), state] as const);
          return checks.length > 0 ? [[o.name, Object.fromEntries(checks)]] : [];
        }),
      ),
    async serve(surfaces) {
      await main.serve?.(surfaces);
      // The other bots answer only the commands every bot has (`/agent`), each as itself.
      for (const o of others) await o.bot.serve?.(surfaces.commands?.everyBot !== undefined ? { commands: surfaces.commands } : {});
    },
    async close() {
      for (const o of others) await o.bot.close();
      await main.close();
    },
  };
}

/**
 * One bot: its REST facets and its gateway session, held by one serving replica at a time under
 * `discord:gateway` (the default bot) or `discord:gateway:<identity>`. Only the default bot's
 * session hands on messages others write and answers every slash command; another's answers the
 * commands every bot has.
 */
function startBot(config: DiscordConfig, token: string, services: PlatformServices, metrics: PlatformMetrics, identity: string | undefined): RunningPlatform {
  const { store } = services;
  const log = identity === undefined ? services.log : services.log.child({ identity });
  const scoped = (name: string): string => (identity === undefined ? name : `${name}:${identity}`);
  // Discord's global rate limit belongs to the bot, so every process sending as it shares one budget.
  const pacer: Pacer = pacerFor({ kind: store.kind, db: services.db }, `discord:${createHash('sha256').update(token).digest('hex').slice(0, 16)}`, {
    perSecond: config.perSecond,
    windowLimit: DISCORD_GLOBAL_LIMIT,
  });
  const rest = new DiscordPlatform({
    token,
    apiUrl: config.apiUrl,
    timeoutMs: config.timeoutMs,
    pace: async (signal) => pacer.acquire(signal),
    metrics,
    chatGuildId: config.chatGuild,
    maxFileBytes: config.maxFileBytes,
  });
  // A chat line past the nonce window is found again by what the gateway reported of its nonce.
  rest.useNonceLedger(services.ledger);
  // Who invokes a command and what Herald itself may do in a channel, through Herald's own session.
  const invokers = new DiscordInvokers({ token, apiUrl: config.apiUrl, timeoutMs: config.timeoutMs });
  // Messages others write reach the gateway's listeners; the gateway asks for them only while some module listens.
  const gatewayInbound = new GatewayInbound();
  let listened = false;
  // Catching up on what the gateway missed is the job of the process whose session is ready.
  const recent = heldHistory(rest.recent, () => lease?.held() === true && gateway?.ready === true);
  const inbound: Inbound = {
    onMessage: (listener) => {
      listened = true;
      return gatewayInbound.onMessage(listener);
    },
    onReaction: (listener) => gatewayInbound.onReaction(listener),
    recent,
  };
  const facets: Platform = {
    name: 'discord',
    title: rest.title,
    idempotentSend: rest.idempotentSend,
    messageUrl: rest.messageUrl,
    messageLink: rest.messageLink,
    files: rest.files,
    sender: rest.sender,
    dms: rest.dms,
    editor: rest.editor,
    reactions: rest.reactions,
    deleter: rest.deleter,
    threading: rest.threading,
    history: rest.history,
    pages: rest.pages,
    channels: loggedChannels(rest.channels, log),
    chat: rest.chat,
    // Another bot hears what its own session hears (the inbox keeps the DMs written to it and the
    // reactions there); it has no catch-up: channels are read back by the default bot's.
    ...(identity === undefined ? { invokers, inbound } : { inbound: { onMessage: inbound.onMessage, onReaction: (listener) => gatewayInbound.onReaction(listener) } }),
  };
  const watchGateway = services.serving && config.gateway;
  let gateway: GatewayConnection | undefined;
  if (watchGateway) services.link(scoped('gateway'), () => (lease !== undefined && !lease.held() ? undefined : gateway?.ready === true));
  // One gateway session per bot across the serving replicas: only the holder of `discord:gateway`
  // opens it (and so answers slash commands and records nonces); the others send over REST, and take
  // it over within seconds when the holder dies. Opening and closing run one after another.
  let lease: Singleton | undefined;
  let surfacesGiven: Partial<Surfaces> | undefined;
  let turns: Promise<void> = Promise.resolve();
  let closing = false;
  const inTurn = (step: () => Promise<void>): void => {
    turns = turns.then(step).catch((err: unknown) => log.error({ err: errorSummary(err) }, 'gateway handover step failed'));
  };
  /** The connection being opened, aborted when the lease is lost meanwhile. */
  let connecting: AbortController | undefined;
  const open = async (): Promise<void> => {
    if (closing || gateway !== undefined || surfacesGiven === undefined || lease?.held() !== true) return;
    connecting = new AbortController();
    try {
      log.info('connecting to the Discord gateway');
      gateway = await connectGateway({
        signal: connecting.signal,
        // Message Content is asked for by the default bot only: DMs carry their text without it.
        ...(listened ? { inbound: gatewayInbound, messageContent: identity === undefined && config.messageContent } : {}),
        token,
        apiUrl: config.apiUrl,
        // Another identity's bot registers only the commands every bot has (`/agent`: people register
        // with each bot), each invocation saying which bot; with none, what it has is left as it is.
        ...(identity === undefined ? { commands: surfacesGiven.commands ?? { definitions: [], run: async (invocation) => `Unknown command /${invocation.name}.` } } : { ...otherBotCommands(surfacesGiven.commands?.everyBot, identity), commandsOptional: true }),
        log,
        onOwnMessage: (m) => services.ownMessage(m.nonce, m.channelId, m.messageId, m.createdAt),
      });
      // Lost while connecting: let go at once.
      if (closing || lease?.held() !== true) await shut();
      else recent.nowHeld();
    } catch (err) {
      // Deliveries do not need the gateway: keep serving, and say so in /readyz. A holder that stays
      // without it stands down (HERALD_SINGLETON_DOWN_MS) and tries again when it next holds the lease.
      if (connecting.signal.aborted) log.info('stopped connecting to the Discord gateway: the lease is gone');
      else log.error({ err: errorSummary(err) }, 'gateway unavailable; slash commands will not be answered');
    } finally {
      connecting = undefined;
    }
  };
  const shut = async (): Promise<void> => {
    const g = gateway;
    gateway = undefined;
    await g?.close();
  };
  return {
    facets,
    readiness: (): Record<string, string> => {
      // Only once Discord refused the token: the bot sends nothing until restarted with a valid one.
      const token = rest.tokenRejected ? { [scoped('token')]: 'rejected by Discord (401)' } : {};
      if (!watchGateway) return token;
      if (lease !== undefined && !lease.held()) return { [scoped('gateway')]: stateOf(lease), ...token };
      return { [scoped('gateway')]: gateway?.ready === true ? 'ok' : 'unavailable', ...token };
    },
    async serve(surfaces) {
      if (!watchGateway) return;
      surfacesGiven = surfaces;
      lease = services.singleton(scoped('discord:gateway'), {
        onAcquired: () => {
          log.info('holding the Discord gateway session');
          inTurn(open);
        },
        onLost: () => {
          log.warn('lost the Discord gateway lease; closing the session');
          // At once, not in turn: a session still connecting (a Discord that does not answer) would hold the turn.
          connecting?.abort();
          inTurn(shut);
          return turns;
        },
        // Not ready for HERALD_SINGLETON_DOWN_MS (Discord cannot be reached from here): another replica may do better.
        up: () => gateway?.ready === true,
      });
    },
    async close() {
      // Close the session before giving the lease up, so another replica's never overlaps it.
      closing = true;
      // A session still connecting (a Discord that does not answer) would hold the turn: stop it.
      connecting?.abort();
      await turns;
      await shut();
      await lease?.close();
      await invokers.destroy();
    },
  };
}

/** The commands another identity's bot registers, if any: every invocation carries the bot's identity. */
function otherBotCommands(everyBot: Omit<CommandSurface, 'everyBot'> | undefined, identity: string): { commands?: Omit<CommandSurface, 'everyBot'> } {
  if (everyBot === undefined || everyBot.definitions.length === 0) return {};
  return { commands: { definitions: everyBot.definitions, run: (invocation) => everyBot.run({ ...invocation, identity }) } };
}

function tokenOf(config: DiscordConfig): string {
  if (config.token === undefined) throw new Error('DISCORD_TOKEN is not set (herald serve starts the built-in sandbox when it is unset)');
  return config.token;
}

/**
 * Lookups answer a failed channel lookup in their own words ("channel not found or not visible to
 * the bot", "discord unavailable"): log what Discord said (status and code) first.
 */
function loggedChannels(channels: Channels, log: Logger): Channels {
  return {
    getChannel: async (channelId) => {
      try {
        return await channels.getChannel(channelId);
      } catch (err) {
        log.warn({ channel_id: channelId, err: errorSummary(err) }, 'channel lookup failed at Discord');
        throw err;
      }
    },
    ...(channels.check !== undefined ? { check: channels.check } : {}),
  };
}
