import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IDS, newRequestId, post, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

const MANAGE_GUILD = String(1 << 5);

describe('/destinations, the operator command', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
    await waitFor(() => h.sandbox.commands.length > 0, 'slash commands');
  });
  afterAll(() => h.close());

  /** Invoke /destinations as the sandbox user; `inDm` invokes it in a DM with the bot. */
  const run = async (subcommand: string, options: Record<string, string> = {}, permissions = MANAGE_GUILD, inDm = false) => {
    const reply = await h.sandbox.invoke({ userId: IDS.user, guildId: inDm ? undefined : IDS.guild, command: 'destinations', subcommand, options, permissions });
    expect(reply.data?.flags).toBe(64);
    return reply.data?.content;
  };

  it('is registered for members with Manage Server, in servers only', () => {
    const cmd = h.sandbox.commands.find((c) => c.name === 'destinations');
    expect(cmd?.['default_member_permissions']).toBe(MANAGE_GUILD);
    expect(cmd?.options?.map((o) => o.name)).toEqual(['set', 'clear', 'list']);
  });

  it('sets, lists and clears mappings like the admin endpoints, and posts follow them', async () => {
    expect(await run('list')).toBe('No destinations are mapped in this server yet. Use `/destinations set`.');
    expect(await run('set', { destination: 'ops', channel: IDS.channels.ops })).toBe(`Posts to **ops** now go to <#${IDS.channels.ops}>.`);
    expect((await h.admin.get('/admin/destinations')).json).toEqual({ items: [{ guild_id: IDS.guild, destination: 'ops', channel_id: IDS.channels.ops }] });
    expect(await run('list')).toBe(`**ops** → <#${IDS.channels.ops}>`);
    const id = newRequestId();
    await h.bridge.post('/mcp/deliveries', post(id, `via command ${id}`, 'ops'));
    await h.waitForState(id, 'delivered');
    expect(h.sandbox.channelMessages(IDS.channels.ops).filter((m) => m.content === `via command ${id}`)).toHaveLength(1);
    expect(await run('clear', { destination: 'ops' })).toBe('Posts to **ops** are no longer mapped here; they fail until a channel is set again.');
    expect(await run('clear', { destination: 'ops' })).toBe('That did not work: mapping not found.');
    expect((await h.admin.get('/admin/destinations')).json).toEqual({ items: [] });
  });

  it('refuses a channel of another server', async () => {
    expect(await run('set', { destination: 'deals', channel: IDS.otherChannel })).toBe('That did not work: channel belongs to another guild.');
  });

  it('refuses a destination that is not one of the choices (clients need not enforce them), naming the allowed ones', async () => {
    const refusal = 'That did not work: destination must be one of alerts, deals, digest, ops.';
    for (const destination of ['general', 'ALERTS', '', 'alerts '.repeat(3)]) {
      expect(await run('set', { destination, channel: IDS.channels.ops })).toBe(refusal);
      expect(await run('clear', { destination })).toBe(refusal);
    }
    // Nothing stored: the admin list still satisfies its schema.
    expect((await h.admin.get('/admin/destinations')).json).toEqual({ items: [] });
  });

  it('refuses members without Manage Server, and DMs', async () => {
    expect(await run('set', { destination: 'ops', channel: IDS.channels.ops }, '0')).toBe('You need the Manage Server permission to change where Herald posts in this server.');
    expect(await run('list', {}, MANAGE_GUILD, true)).toBe('Use this command in a server.');
    expect((await h.admin.get('/admin/destinations')).json).toEqual({ items: [] });
  });

  it('lets a person drive commands through the sandbox control route', async () => {
    const res = await fetch(`${h.sandbox.url}/sandbox/api/interactions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: IDS.user, guildId: IDS.guild, command: 'agent', subcommand: 'register' }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: { content: string } }).data.content).toMatch(/^(Registered\.|Already registered)/);
    const unknown = await fetch(`${h.sandbox.url}/sandbox/api/interactions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: IDS.user, command: 'nope' }),
    });
    expect(unknown.status).toBe(409);
    expect(await unknown.json()).toEqual({ error: '/nope is not registered with this application' });
  });
});
