import type { TokenIdentity } from '../identity-tokens.js';

/** One more Discord bot Herald speaks as (an identity): its name, and its bot token once read (undefined in sandbox mode, where the sandbox makes the bot). */
export type DiscordIdentity = TokenIdentity;

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
   * `HERALD_GATEWAY`: `on` (default) takes part in holding Discord's gateway, which one replica at
   * a time holds by its lease, to answer `/agent` and `/destinations`; `off`: never holds it.
   */
  readonly gateway: boolean;
  /**
   * `HERALD_DISCORD_CHAT_GUILD`: the Discord server the chat tools use on Discord (channels by
   * name, members). Unset: the bot's only server (sandbox mode: the sandbox's guild).
   */
  readonly chatGuild: string | undefined;
  /**
   * `HERALD_DISCORD_MAX_FILE_BYTES`: largest file one message may carry. Default 10485760 (10 MiB,
   * Discord's limit since January 2025); raise it for a server whose boost level allows more.
   */
  readonly maxFileBytes: number;
  /**
   * `HERALD_DISCORD_MESSAGE_CONTENT`: `on` asks the gateway for the privileged Message Content
   * intent (grant it to the bot in Discord's developer portal first, or Discord refuses the
   * session). Off (default): messages in listened channels reach the inbox with empty content;
   * mentions of the bot, DMs and replies to it have their content either way.
   */
  readonly messageContent: boolean;
  /**
   * `HERALD_DISCORD_IDENTITIES`: more Discord bots this Herald speaks as, besides DISCORD_TOKEN's
   * (the identity `default`): a comma-separated list of `name=env:VARIABLE` (the token is in that
   * environment variable) or `name=file:/path` (in that file); in sandbox mode a bare `name`, and
   * the sandbox makes the bot. Each bot has its own rate budget and its own gateway session (under
   * its own lease); the operator's policy binds an agent to one (`identity: name`). Names: a
   * lowercase letter, then up to 31 lowercase letters, digits or `-`.
   */
  readonly identities: readonly DiscordIdentity[];
}
