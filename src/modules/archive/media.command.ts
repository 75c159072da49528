import { ChannelType, PermissionFlagsBits, SlashCommandBuilder } from 'discord.js';
import { requiredOption, type Command } from '../contract.js';
import { DomainError } from '../../infra/errors.js';
import { ConfirmRequiredError, ScrapeRunningError, type Actor, type MediaService } from './media.service.js';

/**
 * `/media start | stop | status`: the media archive from Discord, through the same MediaService
 * (and so the same job queue, storage check and action log) as the MCP tools and the web UI. A
 * member with Manage Server acts in the trusted tier: links scrapes and stops; downloads and
 * deletes need the admin token (the web UI or an admin MCP server).
 */
export const mediaCommand: Command<{ media?: MediaService | undefined }> = {
  definition: new SlashCommandBuilder()
    .setName('media')
    .setDescription("Archive a channel's media (links and metadata)")
    .setDefaultMemberPermissions(PermissionFlagsBits.ManageGuild)
    .setContexts(0)
    .addSubcommand((s) =>
      s
        .setName('start')
        .setDescription("Start (or resume) a scrape of a channel's media")
        .addChannelOption((o) => o.setName('channel').setDescription('The text channel').setRequired(true).addChannelTypes(ChannelType.GuildText))
        .addBooleanOption((o) => o.setName('confirm').setDescription('Start even though storage is near its limit')),
    )
    .addSubcommand((s) =>
      s
        .setName('stop')
        .setDescription("Stop a channel's running scrape")
        .addChannelOption((o) => o.setName('channel').setDescription('The text channel').setRequired(true).addChannelTypes(ChannelType.GuildText)),
    )
    .addSubcommand((s) => s.setName('status').setDescription("This server's scrapes and the archive's storage"))
    .toJSON(),
  aliases: ['archive'],
  preconditions: ['in_guild', 'manage_guild'],
  subcommands: {
    start: { effects: ['changes_herald_data'] },
    stop: { effects: ['changes_herald_data'] },
    status: { effects: ['read_only'] },
  },
  refusals: { manage_guild: 'You need the Manage Server permission to run the media archive in this server.' },
  async execute(i, { media }) {
    if (media === undefined) return 'The media archive is not available on this Herald.';
    const guildId = i.guildId ?? '';
    const actor: Actor = { tier: 'trusted', name: `discord:${i.user.id}`, via: 'discord' };
    const inThisGuild = async (channelId: string) => (await media.listScrapes(actor)).filter((s) => s.guildId === guildId && s.channelId === channelId);
    try {
      switch (i.subcommand) {
        case 'start': {
          const channelId = requiredOption(i, 'channel');
          const { scrape, resumed } = await media.startScrape({ channelId, mode: 'links', confirm: i.option('confirm') === 'true', guildId }, actor);
          return `${resumed ? 'Resumed' : 'Started'} the scrape of <#${channelId}> (links): \`${scrape.id}\`. \`/media status\` shows its progress.`;
        }
        case 'stop': {
          const channelId = requiredOption(i, 'channel');
          const running = (await inThisGuild(channelId)).find((s) => s.state === 'running' || s.state === 'paused');
          if (running === undefined) return `No scrape of <#${channelId}> is running.`;
          const stopped = await media.stopScrape(running.id, actor);
          return `Stopped the scrape of <#${channelId}> after ${stopped.messagesSeen} messages; \`/media start\` resumes it.`;
        }
        case 'status': {
          const storage = await media.storageStatus();
          const mine = (await media.listScrapes(actor)).filter((s) => s.guildId === guildId).slice(0, 10);
          const lines = mine.map((s) => `<#${s.channelId}> ${s.mode}: **${s.state}**, ${s.messagesSeen} messages, ${s.itemsFound} items${s.pauseReason !== null ? ` (${s.pauseReason})` : ''}`);
          const pct = storage.limitBytes === 0 ? 100 : Math.round((storage.usedBytes / storage.limitBytes) * 100);
          return [`Storage: ${pct}% of the limit (${storage.level}).`, ...(lines.length > 0 ? lines : ['No scrapes in this server yet. Use `/media start`.'])].join('\n');
        }
        default:
          return 'Unknown subcommand. Use `/media start`, `/media stop` or `/media status`.';
      }
    } catch (err) {
      if (err instanceof ConfirmRequiredError) return `${err.warning.replace('repeat with confirm true', 'run it again with confirm: True')}.`;
      if (err instanceof ScrapeRunningError) return 'A scrape of that channel is already running; `/media status` shows it.';
      if (err instanceof DomainError) return `Not started: ${err.reason}.`;
      throw err;
    }
  },
};
