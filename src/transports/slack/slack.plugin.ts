import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Pacer } from '../../platform/db/shared-pacer.js';
import { errorSummary } from '../../platform/errors.js';
import { StartupError } from '../../platform/startup.js';
import type { RunningTransport, TransportServices } from '../plugin.js';
import { TransportError } from '../transport.js';
import type { SlackConfig } from './index.js';
import { slackErrorCode } from './slack-client.js';
import { burstPacerFor, tierOf } from './slack-pacer.js';
import { SlackTransport } from './slack-transport.js';

/** At most this long to ask Slack whether it accepts the token before starting anyway. */
const TOKEN_CHECK_MS = 10_000;
/** Slack's answers to auth.test that mean the token itself is refused. */
const TOKEN_REFUSED = new Set(['invalid_auth', 'not_authed', 'token_revoked', 'token_expired', 'account_inactive', 'not_allowed_token_type']);

/**
 * A token Slack refuses stops start-up, before the store opens, with a sentence for the operator
 * (exit 2); Slack not answering does not (deliveries wait for it), so that is only logged.
 */
export async function checkToken(config: SlackConfig, log: Logger): Promise<void> {
  const transport = new SlackTransport({ token: config.botToken, apiUrl: config.apiUrl, timeoutMs: config.timeoutMs });
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
export async function startSlack(config: SlackConfig, services: TransportServices): Promise<RunningTransport> {
  const { store } = services;
  const bot = createHash('sha256').update(config.botToken).digest('hex').slice(0, 16);
  const pacers = new Map<string, Pacer>();
  const pacer = (key: string, make: () => Pacer): Pacer => {
    let p = pacers.get(key);
    if (p === undefined) pacers.set(key, (p = make()));
    return p;
  };
  const transport = new SlackTransport({
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
  return {
    facets: transport,
    readiness: () => ({}),
    async close() {
      // Nothing held open: every Web API call is its own request.
    },
  };
}
