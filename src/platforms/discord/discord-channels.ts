/**
 * Why `channel` is not a Discord channel id (a snowflake, as the contract's ChannelId is), or
 * undefined. Only ids are looked up, so no other text becomes part of a Discord API path.
 */
export function discordChannelIdProblem(channel: string): string | undefined {
  return /^[0-9]{5,25}$/.test(channel) ? undefined : 'channel must be a Discord channel id (a snowflake)';
}
