// Discord's message links: what a delivered message's `url` is on Discord, and where a person opens it.

/** Discord's web origin, where its message links point. */
const DISCORD_WEB = 'https://discord.com';

/** A Discord message link: `scope` is the guild id, or `@me` for a DM. */
export function discordMessageUrl(scope: string, channelId: string, messageId: string): string {
  return `${DISCORD_WEB}/channels/${scope}/${channelId}/${messageId}`;
}

/**
 * Where a person opens the message a Discord link names: the link itself, or in sandbox mode
 * (`linkBase`, the sandbox's origin) the same path on the sandbox, whose page shows that message.
 * Undefined for a URL that is no Discord link.
 */
export function discordMessageLink(url: string, linkBase: string | undefined): string | undefined {
  if (!url.startsWith(`${DISCORD_WEB}/`)) return undefined;
  return (linkBase ?? DISCORD_WEB) + url.slice(DISCORD_WEB.length);
}
