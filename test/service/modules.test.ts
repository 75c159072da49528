import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommandInvocation } from '../../src/platforms/platform.js';
import { CHANNEL, GUILD, startServices, USER, type Services } from '../support/services.js';

/** Destinations, identity, the command router and the memory transport itself, without HTTP. */
describe('modules (service level, memory transport)', () => {
  let s: Services;
  beforeAll(async () => {
    s = await startServices();
    s.memory.addChannel('345678901234567800', { guildId: '999999999999999999' }).addChannel('345678901234567801', { guildId: GUILD, isText: false });
  });
  afterAll(() => s.close());

  const invoke = (name: string, subcommand: string, options: Record<string, string> = {}, extra: Partial<CommandInvocation> = {}): Promise<string> =>
    s.commands.run({
      user: { id: USER, username: 'ada', globalName: 'Ada' },
      guildId: GUILD,
      channelId: CHANNEL,
      name,
      subcommand,
      option: (n) => options[n] ?? null,
      canManageGuild: true,
      ...extra,
    });

  it('maps a destination only to a visible text channel of that guild', async () => {
    await expect(s.destinations.set(GUILD, 'alerts', '345678901234567899')).rejects.toThrow('channel not found or not visible to the bot');
    await expect(s.destinations.set(GUILD, 'alerts', '345678901234567800')).rejects.toThrow('channel belongs to another guild');
    await expect(s.destinations.set(GUILD, 'alerts', '345678901234567801')).rejects.toThrow('channel is not a text channel');
    await expect(s.destinations.set(GUILD, 'nowhere', CHANNEL)).rejects.toThrow('destination must be one of alerts, deals, digest, ops');
    expect(await s.destinations.set(GUILD, 'alerts', CHANNEL)).toEqual({ guild_id: GUILD, destination: 'alerts', channel_id: CHANNEL });
  });

  it('routes commands: preconditions first, then the command, domain refusals as replies', async () => {
    expect(await invoke('destinations', 'list', {}, { canManageGuild: false })).toBe('You need the Manage Server permission to change where Herald posts in this server.');
    expect(await invoke('destinations', 'list', {}, { guildId: null })).toBe('Use this command in a server.');
    expect(await invoke('destinations', 'set', { destination: 'ops', channel: CHANNEL })).toBe(`Posts to **ops** now go to <#${CHANNEL}>.`);
    expect(await invoke('destinations', 'set', { destination: 'nope', channel: CHANNEL })).toBe('That did not work: destination must be one of alerts, deals, digest, ops.');
    expect(await invoke('nothing', 'x')).toBe('Unknown command /nothing.');
  });

  it('refuses to map a destination to a channel Herald cannot post in (bot_can_post, on the channel option)', async () => {
    s.botBlockedIn.add(CHANNEL);
    try {
      expect(await invoke('destinations', 'set', { destination: 'deals', channel: CHANNEL })).toBe('Herald cannot post in that channel: it needs View Channel, Send Messages and Embed Links there.');
      expect((await s.destinations.list()).map((m) => m.destination)).not.toContain('deals');
      // Other subcommands do not need it.
      expect(await invoke('destinations', 'list')).not.toContain('cannot post');
    } finally {
      s.botBlockedIn.delete(CHANNEL);
    }
  });

  it('registers, pairs and redeems a code exactly once through /agent and the identity service', async () => {
    expect(await invoke('agent', 'pair')).toBe('Run `/agent register` first.');
    expect(await invoke('agent', 'register')).toBe('Registered. Run `/agent pair` to generate a pairing code for your agent.');
    const reply = await invoke('agent', 'pair');
    const code = /\*\*([A-Z2-9]{27})\*\*/.exec(reply)?.[1] ?? '';
    const first = await s.identity.redeem(code, 'connector');
    expect(first.discord_user_id).toBe(USER);
    expect(first.user_id).toBe(USER);
    expect((await s.identity.pairing('connector')).user_id).toBe(USER);
    await expect(s.identity.redeem(code, 'connector')).rejects.toThrow('invalid or expired code');
    expect(await invoke('agent', 'unregister')).toBe("Unregistered: your agents' tokens and DMs are revoked.");
  });

  it('the memory transport keeps history, members and inbound messages', async () => {
    const seen: string[] = [];
    const off = s.memory.inbound.onMessage((m) => seen.push(m.content));
    const before = new Date(Date.now() - 1_000);
    s.memory.receive(CHANNEL, USER, 'hi herald');
    off();
    s.memory.receive(CHANNEL, USER, 'unheard');
    expect(seen).toEqual(['hi herald']);
    const { messages, complete } = await s.memory.history.listBetween(CHANNEL, before, new Date(Date.now() + 1_000), 1, AbortSignal.timeout(1_000));
    expect(messages.map((m) => m.authorId)).toEqual([USER]);
    expect(complete).toBe(false);
    expect((await s.memory.members.listMembers(CHANNEL)).map((m) => m.displayName).sort()).toEqual(['Ada', 'Herald']);
  });
});
