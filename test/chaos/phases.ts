/**
 * The campaign's phases, in the order a full run takes them (test/chaos/campaign.ts runs each).
 * Apart from the campaign, so `npm run chaos -- --help` names them without loading it.
 */
export const PHASES = ['default-window', 'short-window', 'pauses', 'partitions', 'slack', 'slack-pauses', 'discord-chat', 'irc-chat', 'irc-pauses', 'handoffs', 'archive'] as const;

export type PhaseName = (typeof PHASES)[number];
