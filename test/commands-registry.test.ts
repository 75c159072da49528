import { readFileSync } from 'node:fs';
import { SlashCommandBuilder } from 'discord.js';
import { describe, expect, it } from 'vitest';
import type { Command } from '../src/modules/commands/command.js';
import { canonicalRegistry, parityProblem, registryFingerprint, registryManifest } from '../src/modules/commands/manifest.js';
import { allCommands } from '../src/modules/modules.js';

// Every command, from the modules that declare them (loaded on demand).
const COMMANDS = await allCommands();
const COMMAND_DEFINITIONS = COMMANDS.map((c) => c.definition);

const REVIEWED = readFileSync(new URL('../src/modules/commands/reviewed-commands.txt', import.meta.url), 'utf8');
const all = COMMANDS as readonly Command<unknown>[];

describe('the command registry', () => {
  it('matches the reviewed registry (the parity gate): a changed command fails here until reviewed-commands.txt is updated', () => {
    expect(parityProblem(all, REVIEWED)).toBeUndefined();
  });

  it('fails the parity gate on a changed parameter, naming the line', () => {
    const destinations = all.find((c) => c.definition.name === 'destinations');
    if (destinations === undefined) throw new Error('no /destinations');
    const json = structuredClone(destinations.definition);
    const set = json.options?.find((o) => o.name === 'set') as { options: { name: string; required?: boolean }[] };
    const channel = set.options.find((o) => o.name === 'channel');
    if (channel === undefined) throw new Error('no channel option');
    channel.required = false;
    const changed = all.map((c) => (c === destinations ? { ...c, definition: json } : c));
    const problem = parityProblem(changed, REVIEWED);
    expect(problem).toContain('- param channel channel required channelTypes=GuildText|GuildNews'.replace('- ', '-     '));
    expect(problem).toContain('+     param channel channel optional');
    expect(registryFingerprint(changed)).not.toBe(registryFingerprint(all));
  });

  it('fails the parity gate on a new alias, a changed effect and a newly visible command', () => {
    const agent = all.find((c) => c.definition.name === 'agent');
    if (agent === undefined) throw new Error('no /agent');
    expect(parityProblem(all.map((c) => (c === agent ? { ...c, aliases: ['agents', 'me'] } : c)), REVIEWED)).toContain('aliases=agents,me');
    expect(parityProblem(all.map((c) => (c === agent ? { ...c, subcommands: { ...c.subcommands, register: { effects: ['read_only'], slashCommandOnly: true } } } : c)), REVIEWED)).toContain(
      'sub register preconditions= effects=read_only slash_command_only',
    );
    // Letting a connector run an identity command is a reviewed change too.
    expect(parityProblem(all.map((c) => (c === agent ? { ...c, subcommands: { ...c.subcommands, pair: { effects: ['changes_herald_data'], preconditions: ['registered'] } } } : c)), REVIEWED)).toContain(
      '+   sub pair preconditions=registered effects=changes_herald_data\n',
    );
    const extra: Command<unknown> = {
      definition: new SlashCommandBuilder().setName('secret').setDescription('x').toJSON(),
      hidden: true,
      preconditions: [],
      subcommands: { '': { effects: ['read_only'] } },
      execute: () => Promise.resolve(''),
    };
    expect(parityProblem([...all, extra], REVIEWED)).toContain('+ command secret hidden');
    expect(parityProblem([...all, { ...extra, hidden: false }], REVIEWED)).toContain('+ command secret aliases=');
  });

  it('builds the slash definitions and the manifest from the same entries, leaving hidden commands out of the manifest', () => {
    expect(COMMAND_DEFINITIONS.map((d) => d.name)).toEqual(['agent', 'destinations', 'media']);
    const hidden: Command<unknown> = {
      definition: new SlashCommandBuilder().setName('secret').setDescription('x').toJSON(),
      hidden: true,
      preconditions: [],
      subcommands: { '': { effects: ['read_only'] } },
      execute: () => Promise.resolve(''),
    };
    const manifest = registryManifest([...all, hidden]);
    expect(manifest.map((c) => c.name)).toEqual(['agent', 'destinations', 'media']);
    const set = manifest[1]?.subcommands.find((s) => s.name === 'set');
    expect(set).toEqual({
      name: 'set',
      description: 'Send a destination to a channel',
      usage: 'destinations set <destination> <channel>',
      parameters: [
        { name: 'destination', description: 'Which destination', type: 'string', required: true, choices: ['alerts', 'deals', 'digest', 'ops'] },
        { name: 'channel', description: 'The text channel', type: 'channel', required: true, channelTypes: ['GuildText', 'GuildNews'] },
      ],
      preconditions: ['in_guild', 'manage_guild', 'bot_can_post'],
      effects: ['changes_herald_data'],
      slashCommandOnly: false,
    });
    expect(manifest[0]?.subcommands.find((s) => s.name === 'pair')?.preconditions).toEqual(['registered']);
    // The identity commands are the user's own consent: the manifest says only their slash command runs them.
    expect(manifest[0]?.subcommands.map((s) => [s.name, s.slashCommandOnly])).toEqual([
      ['register', true],
      ['pair', true],
      ['unregister', true],
    ]);
  });

  it('refuses a name or alias used by two commands', () => {
    const agent = all[0];
    if (agent === undefined) throw new Error('empty registry');
    expect(() => registryManifest([...all, { ...agent, definition: { ...agent.definition, name: 'dest' }, aliases: [] }])).toThrow('two commands answer to dest');
  });

  it('keeps descriptions out of the canonical text (rewording is not a change)', () => {
    expect(canonicalRegistry(all)).not.toContain('Send a destination');
  });
});
