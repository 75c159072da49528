import { PermissionFlagsBits } from 'discord.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_MEMBER_IDS } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';

/** run_command over the bridge, in validate mode: lookup, parsing, real preconditions, nothing else. */
describe('run_command: validate', () => {
  let h: TestHerald;
  beforeAll(async () => {
    // Execution on, so that the refusals below are the only thing between an agent and /agent pair.
    h = await startTestHerald({ env: { HERALD_COMMAND_EXECUTION_ENABLED: 'true' } });
  });
  afterAll(() => h.close());

  const run = async (body: Record<string, unknown>) => {
    const res = await h.bridge.post('/mcp/commands/run', { userId: SANDBOX_MEMBER_IDS.manager, guildId: IDS.guild, channelId: IDS.channels.alerts, ...body });
    expect(res.status, res.text).toBe(200);
    return res.json as { ok: boolean; command: { name: string; subcommand: string; alias?: string } | null; error: { category: string; reason: string; argument?: string; precondition?: string } | null; outputs: unknown[]; sideEffectsMayHaveOccurred: boolean };
  };

  it('lists every visible command with its aliases, parameters, preconditions, effects and the fingerprint', async () => {
    const res = await h.bridge.get('/mcp/commands');
    expect(res.status).toBe(200);
    const list = res.json as { fingerprint: string; commands: { name: string; aliases: string[] }[] };
    expect(list.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(list.commands.map((c) => [c.name, c.aliases])).toEqual([
      ['agent', ['agents']],
      ['destinations', ['dest', 'destination']],
      ['media', ['archive']],
    ]);
  });

  it('describes a command by its name or any alias, as the same record', async () => {
    const byName = await h.bridge.get('/mcp/commands/destinations');
    expect(byName.status).toBe(200);
    for (const alias of ['dest', 'destination', 'DEST']) {
      const res = await h.bridge.get(`/mcp/commands/${alias}`);
      expect(res.status, alias).toBe(alias === 'DEST' ? 404 : 200);
      if (res.status === 200) expect(res.json).toEqual(byName.json);
    }
    expect((await h.bridge.get('/mcp/commands/nope')).json).toEqual({ error: 'unknown command' });
  });

  it('validates /destinations set for a member with Manage Server (through a role), writing nothing', async () => {
    const r = await run({ command: `destinations set alerts <#${IDS.channels.ops}>` });
    expect(r).toMatchObject({ ok: true, error: null, outputs: [], sideEffectsMayHaveOccurred: false, command: { name: 'destinations', subcommand: 'set' } });
    expect((await h.admin.get('/admin/destinations')).json).toEqual({ items: [] });
    // An alias resolves to the same command; a bare id is a channel too.
    expect(await run({ command: `/dest set alerts ${IDS.channels.ops}` })).toMatchObject({ ok: true, command: { name: 'destinations', subcommand: 'set', alias: 'dest' } });
  });

  it('refuses a member without Manage Server; a forged admin field grants nothing (the contract refuses unknown fields)', async () => {
    for (const forged of [{ canManageGuild: true }, { permissions: '8' }, { isAdmin: true }]) {
      const res = await h.bridge.post('/mcp/commands/run', { userId: IDS.user, guildId: IDS.guild, channelId: IDS.channels.alerts, command: 'destinations list', ...forged });
      expect(res.status).toBe(400);
      expect((res.json as { error: string }).error).toMatch(new RegExp(`^unknown field "${Object.keys(forged)[0] ?? ''}": the fields are command, userId, `));
    }
    const r = await run({ userId: IDS.user, command: 'destinations list' });
    expect(r).toMatchObject({ ok: false, error: { category: 'unmet_precondition', precondition: 'manage_guild', reason: 'You need the Manage Server permission to change where Herald posts in this server.' } });
  });

  it('computes permissions with channel overwrites: a member overwrite grants, a role overwrite denies', async () => {
    const channel = h.sandbox.channels.get(IDS.channels.deals);
    if (channel === undefined) throw new Error('no deals channel');
    channel.permission_overwrites = [
      { id: IDS.user, type: 1, allow: String(PermissionFlagsBits.ManageGuild), deny: '0' },
      { id: SANDBOX_MEMBER_IDS.managersRole, type: 0, allow: '0', deny: String(PermissionFlagsBits.ManageGuild) },
    ];
    try {
      expect(await run({ userId: IDS.user, channelId: IDS.channels.deals, command: 'destinations list' })).toMatchObject({ ok: true });
      expect(await run({ channelId: IDS.channels.deals, command: 'destinations list' })).toMatchObject({ ok: false, error: { precondition: 'manage_guild' } });
      // The guild's owner has every permission, overwrites or not.
      expect(await run({ userId: SANDBOX_MEMBER_IDS.owner, channelId: IDS.channels.deals, command: 'destinations list' })).toMatchObject({ ok: true });
    } finally {
      delete channel.permission_overwrites;
    }
  });

  it("checks Herald's own permissions (bot_can_post): on the channel it is asked to map, and on the invoking channel for responseMode discord", async () => {
    const channel = h.sandbox.channels.get(IDS.channels.digest);
    if (channel === undefined) throw new Error('no digest channel');
    // Herald's role may not send in #digest; people still may.
    channel.permission_overwrites = [{ id: SANDBOX_MEMBER_IDS.heraldRole, type: 0, allow: '0', deny: String(PermissionFlagsBits.SendMessages) }];
    try {
      const refused = { ok: false, error: { category: 'unmet_precondition', precondition: 'bot_can_post' } };
      expect(await run({ command: `destinations set alerts <#${IDS.channels.digest}>` })).toMatchObject({ ...refused, error: { ...refused.error, reason: 'Herald cannot post in that channel: it needs View Channel, Send Messages and Embed Links there.' } });
      expect(await run({ command: `destinations set alerts <#${IDS.channels.ops}>` })).toMatchObject({ ok: true });
      // Invoked in #digest: capturing the reply needs nothing of Herald there; posting it does.
      expect(await run({ channelId: IDS.channels.digest, command: 'destinations list' })).toMatchObject({ ok: true });
      expect(await run({ channelId: IDS.channels.digest, command: 'destinations list', responseMode: 'discord' })).toMatchObject(refused);
      expect(await run({ channelId: IDS.channels.alerts, command: 'destinations list', responseMode: 'discord' })).toMatchObject({ ok: true });
    } finally {
      delete channel.permission_overwrites;
    }
    expect(await run({ command: `destinations set alerts <#${IDS.channels.digest}>` })).toMatchObject({ ok: true });
  });

  it('describes the identity commands as slash-command only, and refuses them to validate and to execute: no code issued, the registration unchanged', async () => {
    const agent = (await h.bridge.get('/mcp/commands/agent')).json as { subcommands: { name: string; slashCommandOnly: boolean; preconditions: string[] }[] };
    expect(agent.subcommands.map((s) => [s.name, s.slashCommandOnly])).toEqual([
      ['register', true],
      ['pair', true],
      ['unregister', true],
    ]);
    const destinations = (await h.bridge.get('/mcp/commands/destinations')).json as { subcommands: { slashCommandOnly: boolean }[] };
    expect(destinations.subcommands.every((s) => !s.slashCommandOnly)).toBe(true);
    const owner = SANDBOX_MEMBER_IDS.owner;
    await h.sandbox.invoke({ userId: owner, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    const registration = await h.bridge.get(`/mcp/registration/${owner}`);
    expect(registration.status).toBe(200);
    let key = 0;
    for (const sub of ['register', 'pair', 'unregister']) {
      // Execute with everything execute needs: the owner's own fresh message and a key.
      const execute = { mode: 'execute', sourceMessageId: h.sandbox.writeAsUser(owner, IDS.channels.alerts, `please ${sub} my agent`).id, idempotencyKey: `identity-refused-${++key}`.padEnd(16, '0') };
      for (const [mode, extra] of [['validate', {}], ['execute', execute]] as const) {
        const r = await run({ userId: owner, command: `agents ${sub}`, ...extra });
        expect(r, `${mode} ${sub}`).toMatchObject({ ok: false, command: { name: 'agent', subcommand: sub, alias: 'agents' }, error: { category: 'slash_command_only' }, outputs: [], sideEffectsMayHaveOccurred: false });
        expect(r.error?.reason).toContain(`/agent ${sub} runs only from the user's own slash command`);
      }
      // Nothing ran: no pairing code issued, the registration as it was (not unregistered, not re-registered).
      expect(await h.herald.store.db.selectFrom('pairing_codes').select('user_id').where('user_id', '=', owner).execute(), sub).toEqual([]);
      const after = await h.bridge.get(`/mcp/registration/${owner}`);
      expect([after.status, after.json], sub).toEqual([200, registration.json]);
    }
  });

  it('refuses bots, strangers, and channels of another guild', async () => {
    expect(await run({ userId: SANDBOX_MEMBER_IDS.otherBot, command: 'destinations list' })).toMatchObject({ ok: false, error: { category: 'bot_refused' } });
    expect(await run({ userId: '999999999999999999', command: 'destinations list' })).toMatchObject({ ok: false, error: { category: 'context_not_found', reason: 'user is not a member of that guild' } });
    expect(await run({ channelId: IDS.otherChannel, command: 'destinations list' })).toMatchObject({ ok: false, error: { category: 'context_not_found', reason: 'channel not found in that guild' } });
    expect(await run({ guildId: '999999999999999999', command: 'destinations list' })).toMatchObject({ ok: false, error: { category: 'context_not_found' } });
  });

  it('parses like the slash options, saying which argument is wrong and why', async () => {
    const cases: [string, Record<string, unknown>][] = [
      ['nope', { category: 'unknown_command' }],
      ['destinations', { category: 'invalid_arguments', argument: 'subcommand', reason: 'destinations needs a subcommand: one of set, clear, list' }],
      ['destinations move', { category: 'invalid_arguments', argument: 'subcommand' }],
      [`destinations set general <#${IDS.channels.ops}>`, { category: 'invalid_arguments', argument: 'destination', reason: 'destination must be one of alerts, deals, digest, ops' }],
      ['destinations set alerts', { category: 'invalid_arguments', argument: 'channel', reason: 'channel is required; usage: destinations set <destination> <channel>' }],
      ['destinations set alerts #ops', { category: 'invalid_arguments', argument: 'channel', reason: 'channel must be a channel mention (<#id>) or id' }],
      [`destinations set alerts <#${IDS.channels.ops}> extra`, { category: 'invalid_arguments', reason: 'unexpected argument "extra"; usage: destinations set <destination> <channel>' }],
      ['destinations set "alerts', { category: 'invalid_arguments', reason: 'unterminated quote starting at character 18' }],
      [`destinations set destination:alerts destination:ops`, { category: 'invalid_arguments', argument: 'destination', reason: 'destination is given twice' }],
    ];
    for (const [command, error] of cases) expect((await run({ command })).error, command).toMatchObject(error);
    // Quoted values and name:value work like the slash command's fields.
    expect(await run({ command: `destinations set channel:<#${IDS.channels.ops}> "alerts"` })).toMatchObject({ ok: true });
    expect(await run({ command: 'x'.repeat(2001) })).toMatchObject({ ok: false, error: { category: 'too_long' } });
  });
});
