import { SlashCommandBuilder } from 'discord.js';
import type { Command } from '../contract.js';
import type { IdentityService } from './identity.service.js';

/** `/agent register | pair | unregister`: the user's agent identity (docs/protocol.md §7). */
export const agentCommand: Command<{ identity: IdentityService }> = {
  definition: new SlashCommandBuilder()
    .setName('agent')
    .setDescription('Your AI agent on this bot: register, pair a connector, revoke')
    .addSubcommand((s) => s.setName('register').setDescription('Register so your agents can reach you'))
    .addSubcommand((s) => s.setName('pair').setDescription('Get a one-time code to pair an agent connector (valid 10 minutes)'))
    .addSubcommand((s) => s.setName('unregister').setDescription("Revoke your agents' tokens and DMs"))
    .toJSON(),
  aliases: ['agents'],
  // A person registers with, pairs with and unregisters from each bot that may reach them, on that bot.
  everyBot: true,
  preconditions: [],
  // Pairing is the user's consent to a connector, so only the user gives it: no connector may run
  // these on their behalf (run_command refuses them), and their replies are for the user alone.
  subcommands: {
    register: { effects: ['changes_herald_data'], slashCommandOnly: true },
    pair: { effects: ['changes_herald_data'], preconditions: ['registered'], slashCommandOnly: true },
    unregister: { effects: ['changes_herald_data', 'revokes_credentials'], slashCommandOnly: true },
  },
  async execute(i, { identity }) {
    // Replies name the command as it was invoked.
    const cmd = `/${i.name}`;
    switch (i.subcommand) {
      case 'register': {
        const result = await identity.register({ id: i.user.id, username: i.user.username, globalName: i.user.globalName, platform: i.platform, identity: i.identity });
        return result === 'registered' ? `Registered. Run \`${cmd} pair\` to generate a pairing code for your agent.` : 'Already registered — nothing changed.';
      }
      case 'pair': {
        const result = await identity.pair(i.user.id, i.identity);
        if (result === 'not registered') return `Run \`${cmd} register\` first.`;
        return {
          content:
            `Your pairing code: **${result.code}**\n\n` +
            // docs/protocol.md §7: the first sentence and the code line are parsed by connectors; the rest names Herald's own places.
            "Valid 10 minutes, single use. Enter it only in the `pair` tool of your agent's `herald mcp` or your connector's authorization page — never paste it anywhere else.",
          // For the user's eyes only, wherever the reply would go.
          secret: true,
        };
      }
      case 'unregister':
        return (await identity.unregister(i.user.id, i.identity)) ? "Unregistered: your agents' tokens and DMs are revoked." : "You weren't registered.";
      default:
        return `Unknown subcommand. Use \`${cmd} register\`, \`${cmd} pair\` or \`${cmd} unregister\`.`;
    }
  },
};
