import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_MEDIA_CHANNEL } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

const MANAGE_GUILD = String(1 << 5);

/** `/media`: the archive from Discord, through the same service as the MCP tools and the web UI. */
describe('/media, the archive command', { timeout: 180_000 }, () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ sandbox: { mediaMessages: 3_000 } });
    await waitFor(() => h.sandbox.commands.some((c) => c.name === 'media'), 'the /media command');
  }, 180_000);
  afterAll(() => h.close());

  const run = async (subcommand: string, options: Record<string, string> = {}, permissions = MANAGE_GUILD) => {
    const reply = await h.sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'media', subcommand, options, permissions });
    return reply.data?.content ?? '';
  };

  it('starts, reports, stops and resumes a scrape, written to the action log as the Discord user', async () => {
    expect(await run('status')).toContain('No scrapes in this server yet');
    expect(await run('start', { channel: SANDBOX_MEDIA_CHANNEL })).toMatch(new RegExp(`^Started the scrape of <#${SANDBOX_MEDIA_CHANNEL}> \\(links\\)`));
    expect(await run('start', { channel: SANDBOX_MEDIA_CHANNEL })).toBe('A scrape of that channel is already running; `/media status` shows it.');
    expect(await run('stop', { channel: SANDBOX_MEDIA_CHANNEL })).toMatch(/^Stopped the scrape of/);
    expect(await run('status')).toContain('links: **stopped**');
    expect(await run('start', { channel: SANDBOX_MEDIA_CHANNEL })).toMatch(/^Resumed the scrape/);
    // Read before polling /media status below, whose own entries (list_scrapes) would push these off the page.
    const log = (await h.admin.get('/admin/archive/actions?limit=20')).json as { actions: { actor: string; via: string; action: string }[] };
    expect(log.actions).toEqual(expect.arrayContaining([expect.objectContaining({ actor: `discord:${IDS.user}`, via: 'discord', action: 'start_scrape:links' })]));
    await waitFor(async () => (await run('status')).includes('**completed**, 3000 messages'), 'the scrape to complete');
  });

  it('refuses a channel of another server, and members without Manage Server', async () => {
    expect(await run('start', { channel: IDS.otherChannel })).toBe('Not started: channel not found or not visible to the bot.');
    expect(await run('status', {}, '0')).toBe('You need the Manage Server permission to run the media archive in this server.');
  });
});
