import { tokenIdentities } from '../identity-tokens.js';
import { parseCredentialsKey } from './credentials.js';
import { definePlatform } from '../plugin.js';
import type { SlackConfig } from './settings.js';

export type { SlackConfig } from './settings.js';

/** A Slack bot token's shape. */
const BOT_TOKEN = /^xoxb-[A-Za-z0-9-]+$/;

/**
 * Slack, when SLACK_BOT_TOKEN is set: the Web API for every facet (paced by budgets shared through
 * the store), sends marked with their key in message metadata so a create in doubt is found again.
 */
export const slack = definePlatform<SlackConfig>({
  name: 'slack',
  off: 'SLACK_BOT_TOKEN is unset',
  config(env, core) {
    const botToken = env.text('SLACK_BOT_TOKEN');
    if (botToken !== undefined && !BOT_TOKEN.test(botToken)) env.problem('SLACK_BOT_TOKEN must be a Slack bot token (xoxb-…)');
    const appToken = env.text('SLACK_APP_TOKEN');
    if (appToken !== undefined && !/^xapp-[A-Za-z0-9-]+$/.test(appToken)) env.problem('SLACK_APP_TOKEN must be a Slack app-level token (xapp-…)');
    const apiUrl = env.text('SLACK_API_URL') ?? 'https://slack.com/api/';
    if (!/^https?:\/\/[^\s/]+(\/[^\s]*)?\/$/.test(apiUrl)) env.problem('SLACK_API_URL must be an http(s) URL ending with /');
    // Every variable is read (and checked) even when Slack is off: then a typo in one is still reported.
    const settings = {
      appToken,
      apiUrl,
      postsPerSecond: env.int('HERALD_SLACK_POSTS_PER_SECOND', 1, 1, 50),
      timeoutMs: env.int('HERALD_SLACK_TIMEOUT_MS', 15_000, 100, 600_000),
    };
    const identities = tokenIdentities(env, {
      variable: 'HERALD_SLACK_IDENTITIES',
      main: { variable: 'SLACK_BOT_TOKEN', value: botToken },
      what: 'bot token (xoxb-…)',
      sandboxMakes: 'workspaces',
      shape: (token) => (BOT_TOKEN.test(token) ? undefined : 'not a Slack bot token (xoxb-…)'),
      ownNote: 'a workspace of its own (start-up also asks Slack which workspace each token is for)',
      installs: true,
    });
    // The OAuth install's settings: read (and checked) always; required only by an identity `name=install`.
    const clientId = env.text('SLACK_CLIENT_ID');
    const clientSecret = env.text('SLACK_CLIENT_SECRET');
    const keyText = env.text('HERALD_CREDENTIALS_KEY');
    const parsedKey = keyText === undefined ? undefined : parseCredentialsKey(keyText);
    if (parsedKey !== undefined && !Buffer.isBuffer(parsedKey)) env.problem(parsedKey.problem);
    const credentialsKey = Buffer.isBuffer(parsedKey) ? parsedKey : undefined;
    if (clientId !== undefined && !/^[0-9]+\.[0-9]+$/.test(clientId)) env.problem('SLACK_CLIENT_ID must be a Slack app\'s client id (digits.digits, from api.slack.com/apps → your app → Basic Information)');
    const installs = identities.filter((i) => i.install === true).map((i) => i.name);
    // In sandbox mode (no SLACK_BOT_TOKEN) the sandbox's app supplies its client, and Herald its own key.
    if (installs.length > 0 && botToken !== undefined) {
      const what = `HERALD_SLACK_IDENTITIES installs ${installs.join(', ')} from Herald (name=install)`;
      if (clientId === undefined) env.problem(`${what}: set SLACK_CLIENT_ID (api.slack.com/apps → your app → Basic Information)`);
      if (clientSecret === undefined) env.problem(`${what}: set SLACK_CLIENT_SECRET (api.slack.com/apps → your app → Basic Information)`);
      if (keyText === undefined) env.problem(`${what}: set HERALD_CREDENTIALS_KEY (32 random bytes, base64 or hex: it seals the bot tokens Herald keeps)`);
    }
    const install = { clientId, clientSecret, credentialsKey };
    if (botToken === undefined) {
      // Socket Mode alone cannot answer anything: commands reply and messages are read with the bot token.
      if (appToken !== undefined) env.problem('SLACK_APP_TOKEN is set but SLACK_BOT_TOKEN is not: Slack needs the bot token too');
      // Bare names are for sandbox mode's workspaces (the sandbox hook makes them); anywhere else start-up refuses them.
      return identities.length > 0 ? Object.freeze({ botToken, ...settings, identities, ...install }) : undefined;
    }
    if (core.leaseMs <= settings.timeoutMs) env.problem('HERALD_LEASE_MS must be longer than HERALD_SLACK_TIMEOUT_MS, or a slow attempt could outlive its lease');
    return Object.freeze({ botToken, ...settings, identities, ...install });
  },

  identities: (config) => config.identities.map((i) => i.name),

  // Slack's OAuth install of an identity `name=install` (slack-install.ts), for the operator's browser.
  pages: [
    { method: 'GET', path: '/slack/install', what: 'start installing the app in a workspace for an identity (admin token)' },
    { method: 'GET', path: '/slack/oauth_redirect', what: "Slack's redirect back: finishes the install (the browser that started it only)" },
  ],

  // The Slack client is loaded only when Slack is spoken: `herald --help` and `herald mcp` stay light.
  check: async (config, log) => (await import('./slack.plugin.js')).checkToken(config, log),
  start: async (config, services) => (await import('./slack.plugin.js')).startSlack(config, services),
  // Sandbox mode (no DISCORD_TOKEN and no SLACK_BOT_TOKEN): a local Slack workspace beside the Discord one.
  sandbox: {
    // Also when the settings only name the sandbox's other workspaces (HERALD_SLACK_IDENTITIES, no SLACK_BOT_TOKEN).
    needed: (config) => config === undefined || config.botToken === undefined,
    start: async (options) => (await import('./slack-sandbox-mode.js')).startSlackSandbox(options),
  },
});
