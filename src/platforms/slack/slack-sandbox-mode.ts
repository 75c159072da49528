import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { newCredentialsKey, parseCredentialsKey } from './credentials.js';
import type { PlatformSandbox, SandboxOptions } from '../plugin.js';
import type { SlackConfig } from './settings.js';
import type { TokenIdentity } from '../identity-tokens.js';
import { SlackSandbox, SLACK_SANDBOX_IDS as ids } from './sandbox/sandbox.js';

/**
 * Slack in sandbox mode (no SLACK_BOT_TOKEN): a local workspace kept in the data folder, and
 * Herald's Slack settings pointing at it, with both tokens so slash commands work from its page.
 * The plugin's `sandbox` hook: sandbox mode starts it on a free port after Discord's sandbox.
 */
export async function startSlackSandbox(options: SandboxOptions<SlackConfig>): Promise<PlatformSandbox<SlackConfig>> {
  const sandbox = new SlackSandbox({ stateFile: path.join(options.dataDir, 'sandbox-slack.json') });
  // HERALD_SLACK_IDENTITIES' bare names: the app installed in one more workspace each, with a bot of its own.
  // `name=install`: the workspace is there, but its token reaches Herald only through the OAuth install.
  const identities = options.settings?.identities ?? [];
  const others = identities.map((identity) => ({ ...sandbox.addWorkspace(identity.name, { byOAuth: identity.install === true }), install: identity.install }));
  await sandbox.start(options.port, options.host);
  const config: SlackConfig = Object.freeze({
    botToken: sandbox.botToken,
    appToken: sandbox.appToken,
    apiUrl: sandbox.apiUrl,
    postsPerSecond: 1,
    // A request must end well inside a job's lease.
    timeoutMs: Math.min(15_000, Math.floor(options.core.leaseMs / 2)),
    identities: others.map((o): TokenIdentity => (o.install === true ? { name: o.name, token: undefined, install: true } : { name: o.name, token: o.botToken })),
    clientId: sandbox.clientId,
    clientSecret: sandbox.clientSecret,
    credentialsKey: options.settings?.credentialsKey ?? (others.some((o) => o.install === true) ? keptKey(options.dataDir) : undefined),
  });
  return {
    url: sandbox.workspaceUrl,
    config,
    notes: [
      `map a destination to it: {"transport": "slack", "channel": "${ids.channels.general}"} (#general; the bot joins #alerts, ${ids.channels.alerts}, on its first post)`,
      `people: ada ${ids.users.ada} (workspace admin), bob ${ids.users.bob}; they write and run /agent from the page`,
      ...others.map((o) => `identity ${o.name}: workspace ${o.ids.domain} (${o.ids.team}, its page ${sandbox.url}/${o.ids.team}/), #general ${o.ids.channels.general}${o.install === true ? `; not installed yet: install it from Herald (GET /slack/install?identity=${o.name}, admin token)` : ''}`),
    ],
    close: () => sandbox.close(),
  };
}

/**
 * Sandbox mode's HERALD_CREDENTIALS_KEY, made once and kept in the data folder (as
 * sandbox-tokens.json keeps its tokens): the sealed tokens of installs open again after a restart.
 */
function keptKey(dataDir: string): Buffer {
  const file = path.join(dataDir, 'slack-credentials.key');
  mkdirSync(dataDir, { recursive: true });
  if (!existsSync(file)) writeFileSync(file, `${newCredentialsKey()}\n`, { mode: 0o600, flag: 'wx' });
  const key = parseCredentialsKey(readFileSync(file, 'utf8'));
  if (!Buffer.isBuffer(key)) throw new Error(`${file} does not hold a credentials key (32 bytes, base64): remove it to make a new one (installs made under it must then be made again)`);
  return key;
}
