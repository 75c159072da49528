import { REST } from 'discord.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiscordSandbox } from '../src/platforms/discord/sandbox/sandbox.js';
import { DiscordInboundHistory } from '../src/platforms/discord/discord-inbound-history.js';
import { IDS } from './support/herald.js';

/**
 * A message read back from a channel's history after a failover (the catch-up) is in the guild of
 * that channel: the contract allows a null guild_id only in a DM. Read back without a guild, 15-17
 * of 60 events in a failover test had `guild_id: null`.
 */
describe("the Discord catch-up's messages carry their guild", () => {
  let sandbox: DiscordSandbox;
  let history: DiscordInboundHistory;

  beforeAll(async () => {
    sandbox = await new DiscordSandbox().start();
    const rest = new REST({ version: '10', api: sandbox.apiUrl }).setToken(sandbox.botToken);
    history = new DiscordInboundHistory({ rest, call: (fn) => fn(), selfId: async () => sandbox.bot.id });
  });
  afterAll(() => sandbox?.close());

  const write = async (channelId: string, content: string): Promise<string> => {
    const res = await fetch(`${sandbox.url}/sandbox/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: IDS.user, channelId, content }) });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  };
  const from = new Date(Date.now() - 60_000);

  it('a channel read before the channels were listed (a fresh replica taking over): its guild, asked of Discord', async () => {
    const id = await write(IDS.channels.alerts, 'written while nobody held the gateway');
    const page = await history.since(IDS.channels.alerts, undefined, from, AbortSignal.timeout(10_000));
    const read = page.messages.find((m) => m.messageId === id);
    expect(read).toMatchObject({ channelId: IDS.channels.alerts, guildId: IDS.guild });
    expect(page.messages.every((m) => m.guildId === IDS.guild)).toBe(true);
  });

  it('a channel the listing named: its guild from the listing', async () => {
    const channels = await history.channels(AbortSignal.timeout(10_000));
    expect(channels).toContain(IDS.channels.ops);
    const id = await write(IDS.channels.ops, 'another one');
    const page = await history.since(IDS.channels.ops, undefined, from, AbortSignal.timeout(10_000));
    expect(page.messages.find((m) => m.messageId === id)).toMatchObject({ guildId: IDS.guild });
  });
});
