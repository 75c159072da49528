import { ChannelType, PermissionFlagsBits, SlashCommandBuilder, type SlashCommandStringOption } from 'discord.js';
import { requiredOption, type Command } from '../contract.js';
import { DESTINATIONS } from '../deliveries/index.js';
import type { DestinationMapping, DestinationService } from './destination.service.js';

const destinationOption = (o: SlashCommandStringOption) =>
  o
    .setName('destination')
    .setDescription('Which destination')
    .setRequired(true)
    .addChoices(...DESTINATIONS.map((d) => ({ name: d.destination, value: d.destination })));

/** `/destinations set | clear | list`: where posts to each destination go in this server. */
export const destinationsCommand: Command<{ destinations: DestinationService }> = {
  definition: new SlashCommandBuilder()
    .setName('destinations')
    .setDescription('Where Herald posts each destination in this server')
    .setDefaultMemberPermissions(PermissionFlagsBits.ManageGuild)
    .setContexts(0)
    .addSubcommand((s) =>
      s
        .setName('set')
        .setDescription('Send a destination to a channel')
        .addStringOption(destinationOption)
        .addChannelOption((o) => o.setName('channel').setDescription('The text channel').setRequired(true).addChannelTypes(ChannelType.GuildText, ChannelType.GuildAnnouncement)),
    )
    .addSubcommand((s) => s.setName('clear').setDescription('Stop sending a destination anywhere').addStringOption(destinationOption))
    .addSubcommand((s) => s.setName('list').setDescription('Show where each destination goes'))
    .toJSON(),
  aliases: ['dest', 'destination'],
  preconditions: ['in_guild', 'manage_guild'],
  subcommands: {
    // Posts to the destination will go to that channel: Herald must be able to post there.
    set: { effects: ['changes_herald_data'], preconditions: ['bot_can_post'] },
    clear: { effects: ['changes_herald_data'] },
    list: { effects: ['read_only'] },
  },
  refusals: { manage_guild: 'You need the Manage Server permission to change where Herald posts in this server.' },
  async execute(i, { destinations }) {
    const guildId = i.guildId ?? '';
    switch (i.subcommand) {
      case 'set': {
        // Not trusted to be one of the choices: the service refuses anything else.
        const destination = requiredOption(i, 'destination');
        const channelId = requiredOption(i, 'channel');
        await destinations.set(guildId, destination, channelId);
        return `Posts to **${destination}** now go to <#${channelId}>.`;
      }
      case 'clear': {
        const destination = requiredOption(i, 'destination');
        await destinations.remove(guildId, destination);
        return `Posts to **${destination}** are no longer mapped here; they fail until a channel is set again.`;
      }
      case 'list': {
        const mine = (await destinations.list()).filter((m) => m.guild_id === guildId);
        if (mine.length === 0) return 'No destinations are mapped in this server yet. Use `/destinations set`.';
        return mine.map((m) => `**${m.destination}** → ${where(m)}`).join('\n');
      }
      default:
        return 'Unknown subcommand. Use `/destinations set`, `/destinations clear` or `/destinations list`.';
    }
  },
};

/** A mapping's channel as the list shows it: a channel mention on the home platform, else the platform and the channel's name. */
function where(m: DestinationMapping): string {
  if (m.channel_id !== undefined) return `<#${m.channel_id}>`;
  if (m.irc_channel !== undefined) return `IRC ${m.irc_channel}`;
  return `${m.transport ?? ''} ${m.channel ?? ''}`;
}
