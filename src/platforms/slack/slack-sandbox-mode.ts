import path from 'node:path';
import type { PlatformSandbox, SandboxOptions } from '../plugin.js';
import type { SlackConfig } from './settings.js';
import { SlackSandbox, SLACK_SANDBOX_IDS as ids } from './sandbox/sandbox.js';

/**
 * Slack in sandbox mode (no SLACK_BOT_TOKEN): a local workspace kept in the data folder, and
 * Herald's Slack settings pointing at it, with both tokens so slash commands work from its page.
 * The plugin's `sandbox` hook: sandbox mode starts it on a free port after Discord's sandbox.
 */
export async function startSlackSandbox(options: SandboxOptions<SlackConfig>): Promise<PlatformSandbox<SlackConfig>> {
  const sandbox = new SlackSandbox({ stateFile: path.join(options.dataDir, 'sandbox-slack.json') });
  // HERALD_SLACK_IDENTITIES' bare names: the app installed in one more workspace each, with a bot of its own.
  const others = (options.settings?.identities ?? []).map((identity) => sandbox.addWorkspace(identity.name));
  await sandbox.start(options.port, options.host);
  const config: SlackConfig = Object.freeze({
    botToken: sandbox.botToken,
    appToken: sandbox.appToken,
    apiUrl: sandbox.apiUrl,
    postsPerSecond: 1,
    // A request must end well inside a job's lease.
    timeoutMs: Math.min(15_000, Math.floor(options.core.leaseMs / 2)),
    identities: others.map((o) => ({ name: o.name, token: o.botToken })),
  });
  return {
    url: sandbox.workspaceUrl,
    config,
    notes: [
      `map a destination to it: {"transport": "slack", "channel": "${ids.channels.general}"} (#general; the bot joins #alerts, ${ids.channels.alerts}, on its first post)`,
      `people: ada ${ids.users.ada} (workspace admin), bob ${ids.users.bob}; they write and run /agent from the page`,
      ...others.map((o) => `identity ${o.name}: workspace ${o.ids.domain} (${o.ids.team}, its page ${sandbox.url}/${o.ids.team}/), #general ${o.ids.channels.general}`),
    ],
    close: () => sandbox.close(),
  };
}
