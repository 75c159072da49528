import type { TokenIdentity } from '../identity-tokens.js';

/** Slack's settings. */
export interface SlackConfig {
  /**
   * `SLACK_BOT_TOKEN`: the bot token (xoxb-…) of the workspace the identity `default` speaks in.
   * Unset → Slack is off, or in sandbox mode the sandbox's workspace (then the settings exist
   * only to carry HERALD_SLACK_IDENTITIES' names to the sandbox).
   */
  readonly botToken: string | undefined;
  /** `SLACK_APP_TOKEN`: the app-level token (xapp-…) for Socket Mode: slash commands and messages others write. Unset: none. */
  readonly appToken: string | undefined;
  /** `SLACK_API_URL`: base of Slack's Web API, ending with `/`. Default https://slack.com/api/. */
  readonly apiUrl: string;
  /**
   * `HERALD_SLACK_POSTS_PER_SECOND`: messages Herald posts per second in one Slack channel, shared
   * by every process on one database. Default 1 (Slack's own limit), at most 50.
   */
  readonly postsPerSecond: number;
  /** `HERALD_SLACK_TIMEOUT_MS`: timeout of one Slack Web API request. Default 15 s. */
  readonly timeoutMs: number;
  /**
   * `HERALD_SLACK_IDENTITIES`: more workspaces this Herald speaks in, each as the bot the app has
   * there, besides SLACK_BOT_TOKEN's (the identity `default`): a comma-separated list of
   * `name=env:VARIABLE` or `name=file:/path` (the workspace's bot token, xoxb-…), or
   * `name=install` (the token comes from installing the app there from Herald, Slack's OAuth
   * install: docs/guides/identities.md); in sandbox mode a bare `name`, and the sandbox makes the
   * workspace (for `name=install` too, where the operator then installs the app through Herald). Each has its own rate budgets; the
   * operator's policy binds an agent to one (`identity: name`), the same name as its Discord bot's
   * if it has one. Socket Mode (slash commands, messages others write) serves the default's
   * workspace only.
   */
  readonly identities: readonly TokenIdentity[];
  /**
   * `SLACK_CLIENT_ID`: the app's OAuth client id (api.slack.com/apps → your app → Basic
   * Information), for identities `name=install` of HERALD_SLACK_IDENTITIES, whose workspace's bot
   * token comes from installing the app there from Herald. Required with one; in sandbox mode the
   * sandbox's app supplies it.
   */
  readonly clientId: string | undefined;
  /** `SLACK_CLIENT_SECRET`: the app's OAuth client secret, with SLACK_CLIENT_ID. Never logged. */
  readonly clientSecret: string | undefined;
  /**
   * `HERALD_CREDENTIALS_KEY`: 32 random bytes (64 hex digits, or base64) sealing the bot tokens
   * Herald keeps from Slack installs (AES-256-GCM): required with an identity `name=install`, the
   * same on every replica. In sandbox mode, unset: Herald makes one and keeps it in its data
   * folder (slack-credentials.key). Never logged.
   */
  readonly credentialsKey: Buffer | undefined;
}
