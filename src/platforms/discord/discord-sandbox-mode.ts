import path from 'node:path';
import type { PlatformSandbox, SandboxOptions } from '../plugin.js';
import type { DiscordConfig } from './settings.js';
import { DiscordSandbox, SANDBOX_IDS, SANDBOX_MEMBER_IDS } from './sandbox/sandbox.js';

/**
 * Discord in sandbox mode (no DISCORD_TOKEN): a local Discord kept in the data folder, and Herald's
 * Discord settings pointing at it (its URL and bot token). The plugin's `sandbox` hook: as the
 * first platform with a sandbox it listens on HERALD_SANDBOX_PORT itself.
 */
export async function startDiscordSandbox(options: SandboxOptions<DiscordConfig>): Promise<PlatformSandbox<DiscordConfig>> {
  const settings = options.settings;
  // Discord is left to its sandbox only where it is home without a token (index.ts, `needed`).
  if (settings === undefined) throw new Error('the Discord sandbox starts only where Discord is home');
  const sandbox = new DiscordSandbox({ stateFile: path.join(options.dataDir, 'sandbox-discord.json') });
  await sandbox.start(options.port, options.host);
  // Each identity of HERALD_DISCORD_IDENTITIES is one more bot of the sandbox's, in its guild as
  // Herald's own bot is (the same name is the same bot across restarts, its token new each start).
  const identities = settings.identities.map(({ name }) => {
    const { user, token } = sandbox.addBot(`herald-${name}`);
    sandbox.people.setMember(SANDBOX_IDS.guild, user.id, [SANDBOX_MEMBER_IDS.heraldRole]);
    return { name, token, user: user.id };
  });
  const config: DiscordConfig = Object.freeze({ ...settings, token: sandbox.botToken, apiUrl: sandbox.apiUrl, chatGuild: settings.chatGuild ?? SANDBOX_IDS.guild, identities: identities.map(({ name, token }) => ({ name, token })) });
  return {
    url: sandbox.url,
    page: `${sandbox.url}/sandbox`,
    remark: 'no DISCORD_TOKEN: messages go to this local Discord',
    config,
    tryIt: { guildId: SANDBOX_IDS.guild, channelId: SANDBOX_IDS.channels.alerts },
    // Each other bot, so the operator can tell who posted what on the page.
    notes: identities.map((i) => `identity ${i.name}: bot herald-${i.name} (${i.user}), in the guild as Herald's own bot is`),
    // Links to delivered messages open them on the sandbox's page; its CDN's media may be fetched.
    site: { messageLinkBase: sandbox.url, mediaOrigins: [sandbox.url] },
    // The sandbox page shows which destinations Herald has mapped, beside the channels.
    attach: (herald) => {
      sandbox.destinations = async () => [...(await herald.destinations())];
    },
    close: () => sandbox.close(),
  };
}
