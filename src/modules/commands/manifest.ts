import { createHash } from 'node:crypto';
import { ApplicationCommandOptionType, ChannelType, type APIApplicationCommandOption } from 'discord.js';
import { preconditionsOf, subcommandOptions, type Command, type Effect, type Precondition } from './command.js';

/**
 * The registry as agents see it (list_commands, describe_command): every visible command with its
 * aliases, and per subcommand its parameters, preconditions and effects. Built from the same
 * definitions Discord gets, so the two cannot disagree; hidden commands are left out.
 */

export type ParameterType = 'string' | 'integer' | 'number' | 'boolean' | 'user' | 'channel' | 'role' | 'mentionable';

export interface Parameter {
  name: string;
  description: string;
  type: ParameterType;
  required: boolean;
  /** The only values accepted, when the definition has choices. */
  choices?: string[];
  /** For channel parameters: the channel kinds accepted. */
  channelTypes?: string[];
  minValue?: number;
  maxValue?: number;
  minLength?: number;
  maxLength?: number;
}

export interface SubcommandManifest {
  /** Empty for a command without subcommands. */
  name: string;
  description: string;
  /** How to invoke it as text, e.g. `destinations set <destination> <channel>`. */
  usage: string;
  parameters: Parameter[];
  preconditions: Precondition[];
  effects: Effect[];
  /** Only the user's own slash command runs it; `run_command` refuses it (slash_command_only). */
  slashCommandOnly: boolean;
}

export interface CommandManifest {
  name: string;
  aliases: string[];
  description: string;
  subcommands: SubcommandManifest[];
}

const TYPES: Partial<Record<ApplicationCommandOptionType, ParameterType>> = {
  [ApplicationCommandOptionType.String]: 'string',
  [ApplicationCommandOptionType.Integer]: 'integer',
  [ApplicationCommandOptionType.Number]: 'number',
  [ApplicationCommandOptionType.Boolean]: 'boolean',
  [ApplicationCommandOptionType.User]: 'user',
  [ApplicationCommandOptionType.Channel]: 'channel',
  [ApplicationCommandOptionType.Role]: 'role',
  [ApplicationCommandOptionType.Mentionable]: 'mentionable',
};

function parameterOf(o: APIApplicationCommandOption): Parameter {
  const type = TYPES[o.type];
  if (type === undefined) throw new Error(`option ${o.name} has a type the registry does not describe (${o.type})`);
  const p: Parameter = { name: o.name, description: o.description, type, required: 'required' in o && o.required === true };
  const raw = o as unknown as Record<string, unknown>;
  if (Array.isArray(raw['choices'])) p.choices = (raw['choices'] as { value: string | number }[]).map((c) => String(c.value));
  if (Array.isArray(raw['channel_types'])) p.channelTypes = (raw['channel_types'] as ChannelType[]).map((t) => ChannelType[t]);
  if (typeof raw['min_value'] === 'number') p.minValue = raw['min_value'];
  if (typeof raw['max_value'] === 'number') p.maxValue = raw['max_value'];
  if (typeof raw['min_length'] === 'number') p.minLength = raw['min_length'];
  if (typeof raw['max_length'] === 'number') p.maxLength = raw['max_length'];
  return p;
}

function usageOf(name: string, sub: string, parameters: Parameter[]): string {
  return [name, sub, ...parameters.map((p) => (p.required ? `<${p.name}>` : `[${p.name}]`))].filter((s) => s !== '').join(' ');
}

export function manifestOf(command: Command<unknown>): CommandManifest {
  const d = command.definition;
  const subs = subcommandOptions(d);
  const entries: { name: string; description: string; options: APIApplicationCommandOption[] }[] =
    subs.length > 0
      ? subs.map((s) => ({ name: s.name, description: s.description, options: ('options' in s ? (s.options ?? []) : []) as APIApplicationCommandOption[] }))
      : [{ name: '', description: d.description, options: d.options ?? [] }];
  return {
    name: d.name,
    aliases: [...(command.aliases ?? [])],
    description: d.description,
    subcommands: entries.map((e) => {
      const entry = command.subcommands[e.name];
      if (entry === undefined) throw new Error(`/${d.name} ${e.name} has no effects in the registry`);
      const parameters = e.options.map(parameterOf);
      return {
        name: e.name,
        description: e.description,
        usage: usageOf(d.name, e.name, parameters),
        parameters,
        preconditions: preconditionsOf(command, e.name),
        effects: [...entry.effects],
        slashCommandOnly: entry.slashCommandOnly === true,
      };
    }),
  };
}

/** The visible commands, in registry order; start-up fails on a name or alias used twice. */
export function registryManifest(commands: readonly Command<unknown>[]): CommandManifest[] {
  const seen = new Set<string>();
  for (const c of commands) {
    for (const n of [c.definition.name, ...(c.aliases ?? [])]) {
      if (seen.has(n)) throw new Error(`two commands answer to ${n}`);
      seen.add(n);
    }
  }
  return commands.filter((c) => c.hidden !== true).map(manifestOf);
}

/**
 * The parity gate's canonical text: one line per command, subcommand, parameter and alias, in a
 * fixed order, with what can change what an agent may do (names, aliases, parameter shapes,
 * preconditions, effects, whether it is slash-command only) and without descriptions (rewording is not a change of behaviour).
 */
export function canonicalRegistry(commands: readonly Command<unknown>[]): string {
  const lines: string[] = [];
  const hidden = new Set(commands.filter((c) => c.hidden === true).map((c) => c.definition.name));
  for (const c of commands.map(manifestOf).sort((a, b) => a.name.localeCompare(b.name))) {
    lines.push(`command ${c.name}${hidden.has(c.name) ? ' hidden' : ''} aliases=${[...c.aliases].sort().join(',')}`);
    for (const s of [...c.subcommands].sort((a, b) => a.name.localeCompare(b.name))) {
      lines.push(`  sub ${s.name || '-'} preconditions=${s.preconditions.join(',')} effects=${[...s.effects].sort().join(',')}${s.slashCommandOnly ? ' slash_command_only' : ''}`);
      for (const p of s.parameters) {
        const bounds = [
          p.choices !== undefined ? `choices=${p.choices.join('|')}` : '',
          p.channelTypes !== undefined ? `channelTypes=${p.channelTypes.join('|')}` : '',
          p.minValue !== undefined ? `min=${p.minValue}` : '',
          p.maxValue !== undefined ? `max=${p.maxValue}` : '',
          p.minLength !== undefined ? `minLength=${p.minLength}` : '',
          p.maxLength !== undefined ? `maxLength=${p.maxLength}` : '',
        ].filter((b) => b !== '');
        lines.push(`    param ${p.name} ${p.type} ${p.required ? 'required' : 'optional'}${bounds.length > 0 ? ' ' + bounds.join(' ') : ''}`);
      }
    }
  }
  return lines.join('\n') + '\n';
}

/** The registry fingerprint: SHA-256 of the canonical text. */
export function registryFingerprint(commands: readonly Command<unknown>[]): string {
  return createHash('sha256').update(canonicalRegistry(commands)).digest('hex');
}

/**
 * The parity gate: undefined when the registry is the reviewed one (the committed file
 * `reviewed-commands.txt`: its canonical text), else what changed, for the test to fail with.
 */
export function parityProblem(commands: readonly Command<unknown>[], reviewed: string): string | undefined {
  const actual = canonicalRegistry(commands);
  if (actual === reviewed) return undefined;
  const want = new Set(reviewed.split('\n'));
  const have = new Set(actual.split('\n'));
  const added = [...have].filter((l) => !want.has(l)).map((l) => `+ ${l}`);
  const removed = [...want].filter((l) => !have.has(l)).map((l) => `- ${l}`);
  return `the command registry differs from the reviewed one (src/modules/commands/reviewed-commands.txt):\n${[...removed, ...added].join('\n')}\nReview the change, then update the file in the same commit.`;
}
