import type { CommandDefinition, CommandInvocation } from '../platform.js';

/** The option types of a subcommand and a group, as the command definitions number them. */
const SUBCOMMAND = 1;
const SUBCOMMAND_GROUP = 2;

/** The fields of a Slack slash command payload Herald reads. */
export interface SlashPayload {
  team_id?: string;
  channel_id?: string;
  user_id?: string;
  user_name?: string;
  command?: string;
  text?: string;
  response_url?: string;
}

/**
 * A Slack slash command as Herald's command router sees it. Slack gives one line of text after
 * the command; the command definitions (src/platforms/commands.ts, the one list of Herald's commands) say how
 * to read it: the first word is the subcommand, and the words after it fill that subcommand's
 * options in order, the last option taking the rest of the line. A channel or user Slack wrote as
 * `<#C…|name>` or `<@U…|name>` gives its id, as a Discord channel option does.
 */
export function invocationOf(payload: SlashPayload, definitions: readonly CommandDefinition[], canManageGuild: boolean): CommandInvocation {
  const name = (payload.command ?? '').replace(/^\//, '');
  const definition = definitions.find((d) => d.name === name);
  const words = (payload.text ?? '').trim().split(/\s+/).filter((w) => w !== '');
  const top = definition?.options ?? [];
  const hasSubcommands = top.some((o) => o.type === SUBCOMMAND || o.type === SUBCOMMAND_GROUP);
  let subcommand: string | null = null;
  let optionNames: string[];
  if (hasSubcommands || definition === undefined) {
    subcommand = words.shift()?.toLowerCase() ?? null;
    const sub = top.find((o) => o.type === SUBCOMMAND && o.name === subcommand);
    optionNames = (sub?.options ?? []).map((o) => o.name);
  } else {
    optionNames = top.map((o) => o.name);
  }
  const values = new Map<string, string>();
  optionNames.forEach((option, i) => {
    const last = i === optionNames.length - 1;
    const value = last ? words.slice(i).join(' ') : words[i];
    if (value !== undefined && value !== '') values.set(option, idOf(value));
  });
  return {
    user: { id: payload.user_id ?? '', username: payload.user_name ?? '', globalName: null },
    guildId: payload.team_id ?? null,
    channelId: payload.channel_id ?? null,
    name,
    subcommand,
    option: (option) => values.get(option) ?? null,
    canManageGuild,
    platform: 'slack',
  };
}

/** `<#C123|general>` → C123, `<@U123|ada>` → U123; anything else as written. */
function idOf(word: string): string {
  const ref = /^<[#@]([A-Z0-9]+)(?:\|[^>]*)?>$/.exec(word);
  return ref?.[1] ?? word;
}

/**
 * How a slash command is named in Herald's log: the command, and its subcommand when the
 * definitions list one by that name (any other word of the text may be a value, a code).
 */
export function commandLabel(payload: SlashPayload, definitions: readonly CommandDefinition[]): string {
  const name = (payload.command ?? '').replace(/^\//, '');
  const first = (payload.text ?? '').trim().split(/\s+/)[0]?.toLowerCase() ?? '';
  const known = definitions.find((d) => d.name === name)?.options?.some((o) => o.type === SUBCOMMAND && o.name === first) ?? false;
  return known ? `${name} ${first}` : name;
}
