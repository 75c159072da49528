import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { pacerFor, type Pacer } from '../../platform/db/shared-pacer.js';
import { errorSummary } from '../../platform/errors.js';
import { discordTokenRejected } from '../../platform/startup.js';
import { defineTransport } from '../plugin.js';
import type { Channels, Inbound, Transport } from '../transport.js';
import { DiscordTokenRejectedError, DiscordTransport } from './discord-transport.js';
import { PlatformMetrics } from './discord.metrics.js';
import { connectGateway, GatewayInbound, type GatewayConnection } from './gateway-client.js';
import { DiscordInvokers } from './invokers.js';

/** Discord's global rate limit: requests per second per bot. */
const DISCORD_GLOBAL_LIMIT = 50;
/** At most this long to ask Discord whether it accepts the token before starting anyway. */
const TOKEN_CHECK_MS = 10_000;

/** Discord's settings. */
export interface DiscordConfig {
  /** `DISCORD_TOKEN`: the bot token. Unset → Herald runs and uses its built-in Discord sandbox. */
  readonly token: string | undefined;
  /** `DISCORD_API_URL`: base of Discord's REST API (without `/v10`). Default Discord's own, or the sandbox's. */
  readonly apiUrl: string | undefined;
  /**
   * `HERALD_DISCORD_PER_SECOND`: Discord REST requests per second for this bot, shared by every
   * process on one database (Discord's global limit, 50/s, is per bot). Default 48, at most 49:
   * the margin lets a request start a little late without overflowing Discord's one-second window.
   */
  readonly perSecond: number;
  /** `HERALD_DISCORD_TIMEOUT_MS`: timeout of one Discord REST request. */
  readonly timeoutMs: number;
  /**
   * `HERALD_GATEWAY`: `on` (default) connects to Discord's gateway to answer `/agent` and
   * `/destinations`; `off` for extra `serve` replicas (only one process should answer commands).
   */
  readonly gateway: boolean;
  /**
   * `HERALD_DISCORD_CHAT_GUILD`: the Discord server the chat tools use on Discord (channels by
   * name, members). Unset: the bot's only server (sandbox mode: the sandbox's guild).
   */
  readonly chatGuild: string | undefined;
}

/**
 * Discord: REST for every facet (paced by one budget per bot, shared through the store), and in a
 * serving process the gateway, which answers slash commands, reports the bot's own messages with
 * their nonces, and hands on messages others write.
 */
export const discord = defineTransport<DiscordConfig>({
  name: 'discord',
  off: 'HERALD_TRANSPORT is not discord and DISCORD_TOKEN is unset',
  config(env, core) {
    const token = env.text('DISCORD_TOKEN');
    const config: DiscordConfig = {
      token,
      apiUrl: env.url('DISCORD_API_URL'),
      perSecond: env.int('HERALD_DISCORD_PER_SECOND', 48, 1, 49),
      timeoutMs: env.int('HERALD_DISCORD_TIMEOUT_MS', 15_000, 100, 600_000),
      gateway: env.onOff('HERALD_GATEWAY', true),
      chatGuild: env.text('HERALD_DISCORD_CHAT_GUILD'),
    };
    if (config.chatGuild !== undefined && !/^[0-9]{5,25}$/.test(config.chatGuild)) env.problem('HERALD_DISCORD_CHAT_GUILD must be a guild id (a snowflake)');
    // Discord is spoken where it is home (sandbox mode without a token) or where a token is given.
    if (core.home !== 'discord' && token === undefined) return undefined;
    if (core.leaseMs <= config.timeoutMs) env.problem('HERALD_LEASE_MS must be longer than HERALD_DISCORD_TIMEOUT_MS, or a slow attempt could outlive its lease');
    return Object.freeze(config);
  },

  // A token Discord rejects stops start-up, before the store opens; Discord not answering does not
  // (deliveries wait for it), so that is only logged.
  async check(config, log) {
    const transport = new DiscordTransport({ token: tokenOf(config), apiUrl: config.apiUrl, timeoutMs: config.timeoutMs });
    try {
      await transport.verifyToken(AbortSignal.timeout(Math.min(config.timeoutMs, TOKEN_CHECK_MS)));
    } catch (err) {
      if (err instanceof DiscordTokenRejectedError) {
        log.error({ status: err.status, code: err.code }, 'Discord rejected DISCORD_TOKEN');
        throw discordTokenRejected(err.status, err);
      }
      log.warn({ err: errorSummary(err) }, 'could not check DISCORD_TOKEN with Discord; starting anyway');
    }
  },

  async start(config, services) {
    const token = tokenOf(config);
    const { store, log } = services;
    // Discord's global rate limit belongs to the bot, so every process sending as it shares one budget.
    const pacer: Pacer = pacerFor({ kind: store.kind, db: services.db }, `discord:${createHash('sha256').update(token).digest('hex').slice(0, 16)}`, {
      perSecond: config.perSecond,
      windowLimit: DISCORD_GLOBAL_LIMIT,
    });
    const rest = new DiscordTransport({
      token,
      apiUrl: config.apiUrl,
      timeoutMs: config.timeoutMs,
      pace: async (signal) => pacer.acquire(signal),
      metrics: new PlatformMetrics(services.registry),
      chatGuildId: config.chatGuild,
    });
    // Who invokes a command and what Herald itself may do in a channel, through Herald's own session.
    const invokers = new DiscordInvokers({ token, apiUrl: config.apiUrl, timeoutMs: config.timeoutMs });
    // Messages others write reach the gateway's listeners; the gateway asks for them only while some module listens.
    const gatewayInbound = new GatewayInbound();
    let listened = false;
    const inbound: Inbound = {
      onMessage: (listener) => {
        listened = true;
        return gatewayInbound.onMessage(listener);
      },
    };
    const facets: Transport = {
      name: 'discord',
      idempotentSend: rest.idempotentSend,
      sender: rest.sender,
      dms: rest.dms,
      editor: rest.editor,
      history: rest.history,
      pages: rest.pages,
      channels: loggedChannels(rest.channels, log),
      chat: rest.chat,
      invokers,
      inbound,
    };
    const watchGateway = services.serving && config.gateway;
    let gateway: GatewayConnection | undefined;
    if (watchGateway) services.link('gateway', () => gateway?.ready === true);
    return {
      facets,
      readiness: (): Record<string, string> => (watchGateway ? { gateway: gateway?.ready === true ? 'ok' : 'unavailable' } : {}),
      async serve(surfaces) {
        if (!watchGateway) return;
        try {
          log.info('connecting to the Discord gateway');
          gateway = await connectGateway({
            ...(listened ? { inbound: gatewayInbound } : {}),
            token,
            apiUrl: config.apiUrl,
            commands: surfaces.commands ?? { definitions: [], run: async (invocation) => `Unknown command /${invocation.name}.` },
            log,
            onOwnMessage: (m) => services.ownMessage(m.nonce, m.channelId, m.messageId, m.createdAt),
          });
        } catch (err) {
          // Deliveries do not need the gateway: keep serving, and say so in /readyz.
          log.error({ err: errorSummary(err) }, 'gateway unavailable; slash commands will not be answered');
        }
      },
      async close() {
        await gateway?.close();
        await invokers.destroy();
      },
    };
  },
});

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
  };
}
