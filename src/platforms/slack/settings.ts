/** Slack's settings. */
export interface SlackConfig {
  /** `SLACK_BOT_TOKEN`: the bot token (xoxb-…). Unset → Slack is off. */
  readonly botToken: string;
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
}
