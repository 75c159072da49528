/** The ids the seeded sandbox uses (docs/protocol.md's example ids). */
export const SANDBOX_IDS = {
  guild: '234567890123456789',
  user: '123456789012345678',
  channels: { alerts: '345678901234567890', deals: '345678901234567891', digest: '345678901234567892', ops: '345678901234567893' },
  otherGuild: '234567890123456790',
  otherChannel: '345678901234567899',
  voiceChannel: '345678901234567898',
} as const;
