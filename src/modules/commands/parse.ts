import type { CommandManifest, Parameter, SubcommandManifest } from './manifest.js';

/**
 * A command written as text (`destinations set alerts <#345678901234567890>`), read by the same
 * rules as the slash command's options: the command's name or an alias, its subcommand, then the
 * parameters in order or as `name:value`; "quoted strings"; mentions (`<#id>`, `<@id>`, `<@&id>`)
 * or bare ids; only the declared choices; the declared bounds.
 */

export interface ParsedCommand {
  command: CommandManifest;
  subcommand: SubcommandManifest;
  /** The name it was invoked by, when an alias. */
  alias: string | undefined;
  /** Values by parameter name, as the slash command would carry them (a channel option: its id). */
  options: Record<string, string>;
}

export interface ParseError {
  category: 'unknown_command' | 'invalid_arguments';
  /** The parameter (or `subcommand`) at fault, when one is. */
  argument?: string;
  reason: string;
}

/** Split on whitespace, keeping "double" or 'single' quoted runs (backslash escapes inside) together. */
export function tokenize(text: string): string[] | ParseError {
  const tokens: string[] = [];
  let i = 0;
  while (i < text.length) {
    while (i < text.length && /\s/.test(text[i] ?? '')) i++;
    if (i >= text.length) break;
    let token = '';
    while (i < text.length && !/\s/.test(text[i] ?? '')) {
      const c = text[i] ?? '';
      if (c === '"' || c === "'") {
        const start = i;
        i++;
        while (i < text.length && text[i] !== c) {
          if (text[i] === '\\' && i + 1 < text.length) i++;
          token += text[i];
          i++;
        }
        if (i >= text.length) return { category: 'invalid_arguments', reason: `unterminated quote starting at character ${start + 1}` };
        i++;
      } else {
        token += c;
        i++;
      }
    }
    tokens.push(token);
  }
  return tokens;
}

const SNOWFLAKE = /^[0-9]{17,20}$/;
const MENTIONS: Partial<Record<Parameter['type'], RegExp>> = {
  channel: /^<#([0-9]{17,20})>$/,
  user: /^<@!?([0-9]{17,20})>$/,
  role: /^<@&([0-9]{17,20})>$/,
  mentionable: /^<@[!&]?([0-9]{17,20})>$/,
};

/** One value as the parameter's type, or why it is not one. */
function convert(p: Parameter, raw: string): string | { reason: string } {
  switch (p.type) {
    case 'string': {
      if (p.choices !== undefined && !p.choices.includes(raw)) return { reason: `must be one of ${p.choices.join(', ')}` };
      if (p.minLength !== undefined && raw.length < p.minLength) return { reason: `must be at least ${p.minLength} characters` };
      if (p.maxLength !== undefined && raw.length > p.maxLength) return { reason: `must be at most ${p.maxLength} characters` };
      return raw;
    }
    case 'integer':
    case 'number': {
      const n = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(n) || (p.type === 'integer' && !Number.isInteger(n))) return { reason: `must be ${p.type === 'integer' ? 'an integer' : 'a number'}` };
      if (p.minValue !== undefined && n < p.minValue) return { reason: `must be at least ${p.minValue}` };
      if (p.maxValue !== undefined && n > p.maxValue) return { reason: `must be at most ${p.maxValue}` };
      if (p.choices !== undefined && !p.choices.includes(String(n))) return { reason: `must be one of ${p.choices.join(', ')}` };
      return String(n);
    }
    case 'boolean': {
      const v = raw.toLowerCase();
      if (v === 'true' || v === 'yes') return 'true';
      if (v === 'false' || v === 'no') return 'false';
      return { reason: 'must be true or false' };
    }
    default: {
      const mention = MENTIONS[p.type]?.exec(raw);
      if (mention?.[1] !== undefined) return mention[1];
      if (SNOWFLAKE.test(raw)) return raw;
      const example = { channel: '<#id>', user: '<@id>', role: '<@&id>', mentionable: '<@id> or <@&id>' }[p.type];
      return { reason: `must be a ${p.type} mention (${example}) or id` };
    }
  }
}

export function parseCommand(text: string, manifest: readonly CommandManifest[]): ParsedCommand | ParseError {
  const tokens = tokenize(text.trim().replace(/^\//, ''));
  if (!Array.isArray(tokens)) return tokens;
  const [first, ...rest] = tokens;
  if (first === undefined || first === '') return { category: 'unknown_command', reason: 'the command is empty' };
  const word = first.toLowerCase();
  const command = manifest.find((c) => c.name === word || c.aliases.includes(word));
  if (command === undefined) return { category: 'unknown_command', reason: `no command ${word}; list_commands shows them all` };
  const alias = command.name === word ? undefined : word;
  let subcommand = command.subcommands.find((s) => s.name === '');
  let args = rest;
  if (subcommand === undefined) {
    const names = command.subcommands.map((s) => s.name).join(', ');
    const sub = rest[0]?.toLowerCase();
    if (sub === undefined) return { category: 'invalid_arguments', argument: 'subcommand', reason: `${command.name} needs a subcommand: one of ${names}` };
    subcommand = command.subcommands.find((s) => s.name === sub);
    if (subcommand === undefined) return { category: 'invalid_arguments', argument: 'subcommand', reason: `${command.name} has no subcommand ${sub}: one of ${names}` };
    args = rest.slice(1);
  }
  const options: Record<string, string> = {};
  const positional = [...subcommand.parameters];
  for (const arg of args) {
    const named = /^([a-z0-9_-]{1,32}):(.*)$/s.exec(arg);
    let p: Parameter | undefined;
    let raw = arg;
    if (named?.[1] !== undefined && subcommand.parameters.some((q) => q.name === named[1])) {
      p = subcommand.parameters.find((q) => q.name === named[1]);
      raw = named[2] ?? '';
    } else {
      p = positional.find((q) => options[q.name] === undefined);
      if (p === undefined) return { category: 'invalid_arguments', reason: `unexpected argument "${arg.slice(0, 100)}"; usage: ${subcommand.usage}` };
    }
    if (p === undefined) continue;
    if (options[p.name] !== undefined) return { category: 'invalid_arguments', argument: p.name, reason: `${p.name} is given twice` };
    const value = convert(p, raw);
    if (typeof value !== 'string') return { category: 'invalid_arguments', argument: p.name, reason: `${p.name} ${value.reason}` };
    options[p.name] = value;
  }
  const missing = subcommand.parameters.find((p) => p.required && options[p.name] === undefined);
  if (missing !== undefined) return { category: 'invalid_arguments', argument: missing.name, reason: `${missing.name} is required; usage: ${subcommand.usage}` };
  return { command, subcommand, alias, options };
}
