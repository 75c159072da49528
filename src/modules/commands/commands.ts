import {
  ChannelType,
  MessageFlags,
  PermissionFlagsBits,
  SlashCommandBuilder,
  type SlashCommandStringOption,
  type ChatInputCommandInteraction,
  type RESTPostAPIChatInputApplicationCommandsJSONBody,
} from 'discord.js';
import { DESTINATIONS } from '../deliveries/delivery.js';
import type { DestinationService } from '../destinations/destination.service.js';
import { DomainError } from '../../platform/errors.js';
import type { IdentityService } from '../identity/identity.service.js';

/** `/agent register | pair | unregister`: the user's agent identity (PROTOCOL.md §7). */
const agent = new SlashCommandBuilder()
  .setName('agent')
  .setDescription('Your AI agent on this bot: register, pair a connector, revoke')
  .addSubcommand((s) => s.setName('register').setDescription('Register so your agents can reach you'))
  .addSubcommand((s) => s.setName('pair').setDescription('Get a one-time code to pair an agent connector (valid 10 minutes)'))
  .addSubcommand((s) => s.setName('unregister').setDescription("Revoke your agents' tokens and DMs"));

const destinationOption = (o: SlashCommandStringOption) =>
  o
    .setName('destination')
    .setDescription('Which destination')
    .setRequired(true)
    .addChoices(...DESTINATIONS.map((d) => ({ name: d.destination, value: d.destination })));

/** `/destinations set | clear | list`: where posts to each destination go in this server. */
const destinations = new SlashCommandBuilder()
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
  .addSubcommand((s) =>
    s
      .setName('clear')
      .setDescription('Stop sending a destination anywhere')
      .addStringOption(destinationOption),
  )
  .addSubcommand((s) => s.setName('list').setDescription('Show where each destination goes'));

export const COMMANDS: RESTPostAPIChatInputApplicationCommandsJSONBody[] = [agent.toJSON(), destinations.toJSON()];

export interface CommandDeps {
  identity: IdentityService;
  destinations: DestinationService;
}

/** Answer one slash command. Every reply is ephemeral: only the invoking user sees it. */
export async function answerCommand(i: ChatInputCommandInteraction, deps: CommandDeps): Promise<void> {
  const content = i.commandName === 'destinations' ? await destinationsReply(i, deps.destinations) : await agentReply(i, deps.identity);
  await i.reply({ content, flags: MessageFlags.Ephemeral, allowedMentions: { parse: [] } });
}

async function agentReply(i: ChatInputCommandInteraction, identity: IdentityService): Promise<string> {
  // Replies name the command as it was invoked.
  const cmd = `/${i.commandName}`;
  const sub = i.options.getSubcommand(false);
  switch (sub) {
    case 'register': {
      const result = await identity.register({ id: i.user.id, username: i.user.username, globalName: i.user.globalName });
      return result === 'registered' ? `Registered. Run \`${cmd} pair\` to generate a pairing code for your agent.` : 'Already registered — nothing changed.';
    }
    case 'pair': {
      const result = await identity.pair(i.user.id);
      if (result === 'not registered') return `Run \`${cmd} register\` first.`;
      return (
        `Your pairing code: **${result.code}**\n\n` +
        "Valid 10 minutes, single use. Enter it only in `discord-mcp pair` or your connector's authorization page — never paste it anywhere else."
      );
    }
    case 'unregister':
      return (await identity.unregister(i.user.id)) ? "Unregistered: your agents' tokens and DMs are revoked." : "You weren't registered.";
    default:
      return `Unknown subcommand. Use \`${cmd} register\`, \`${cmd} pair\` or \`${cmd} unregister\`.`;
  }
}

async function destinationsReply(i: ChatInputCommandInteraction, service: DestinationService): Promise<string> {
  if (!i.inGuild()) return 'Use this command in a server.';
  if (!i.memberPermissions?.has(PermissionFlagsBits.ManageGuild)) return 'You need the Manage Server permission to change where Herald posts in this server.';
  const sub = i.options.getSubcommand(false);
  try {
    switch (sub) {
      case 'set': {
        // Not trusted to be one of the choices: the service refuses anything else.
        const destination = i.options.getString('destination', true);
        const channel = i.options.getChannel('channel', true);
        await service.set(i.guildId, destination, channel.id);
        return `Posts to **${destination}** now go to <#${channel.id}>.`;
      }
      case 'clear': {
        const destination = i.options.getString('destination', true);
        await service.remove(i.guildId, destination);
        return `Posts to **${destination}** are no longer mapped here; they fail until a channel is set again.`;
      }
      case 'list': {
        const mine = (await service.list()).filter((m) => m.guild_id === i.guildId);
        if (mine.length === 0) return 'No destinations are mapped in this server yet. Use `/destinations set`.';
        return mine.map((m) => `**${m.destination}** → <#${m.channel_id}>`).join('\n');
      }
      default:
        return 'Unknown subcommand. Use `/destinations set`, `/destinations clear` or `/destinations list`.';
    }
  } catch (err) {
    if (err instanceof DomainError) return `That did not work: ${err.reason}.`;
    throw err;
  }
}
