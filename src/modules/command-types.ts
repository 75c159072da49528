import type { RESTPostAPIChatInputApplicationCommandsJSONBody } from 'discord.js';
import type { CommandInvocation } from '../platforms/platform.js';

// What a command is, as a module declares one (src/modules/contract.ts re-exports these): the
// commands module (src/modules/commands/) routes and runs them.

/**
 * What must hold before a command runs; checked by the router, never by the command itself.
 * in_guild: invoked in a server; manage_guild: the member has Manage Server there (as Discord
 * computes it from roles and channel overwrites); registered: the user ran `/agent register`;
 * bot_can_post: Herald itself can view, send and embed in the channel the command is about (its
 * `channel` option, else the channel it is invoked in), as Discord computes Herald's permissions.
 */
export type Precondition = 'in_guild' | 'manage_guild' | 'registered' | 'bot_can_post';
export const PRECONDITIONS: readonly Precondition[] = ['in_guild', 'manage_guild', 'registered', 'bot_can_post'];

/**
 * What running a command may do, for an agent deciding whether to ask first: read only; change
 * Herald's data; send to the platform; revoke credentials.
 */
export type Effect = 'read_only' | 'changes_herald_data' | 'sends_to_platform' | 'revokes_credentials';

/** One subcommand's registry entry beyond its slash definition. */
export interface SubcommandEntry {
  readonly effects: readonly Effect[];
  /** Checked after the command's own preconditions. */
  readonly preconditions?: readonly Precondition[];
  /**
   * Only the user's own slash command runs it, never a connector over `run_command`: for a
   * command that is itself the user's consent (registering, pairing a connector, revoking).
   */
  readonly slashCommandOnly?: boolean;
}

/**
 * A command's reply, when plain text does not say enough. `secret`: a credential for the invoking
 * user alone (a pairing code): shown only in their own ephemeral slash-command reply, never posted
 * to a channel, returned to a connector, stored or logged.
 */
export interface CommandReply {
  readonly content: string;
  readonly secret?: boolean;
}

/** One command: its definition, aliases, preconditions, effects and what it does. Its reply is the returned text (or a CommandReply). */
export interface Command<Deps> {
  /** The slash command, built with discord.js's builders: names, subcommands, parameters. */
  readonly definition: RESTPostAPIChatInputApplicationCommandsJSONBody;
  /** Other names it answers to in a text invocation (over MCP); Discord has no slash aliases. */
  readonly aliases?: readonly string[];
  /** Never listed or run over MCP (still a slash command). */
  readonly hidden?: boolean;
  /**
   * Registered on every bot of a platform where Herald is several (src/infra/policy/identity.ts),
   * not only on the default one; its invocations say which bot (`CommandInvocation.identity`).
   */
  readonly everyBot?: boolean;
  readonly preconditions: readonly Precondition[];
  /** By subcommand name; a command without subcommands uses the key ''. */
  readonly subcommands: Readonly<Record<string, SubcommandEntry>>;
  /** How a failed precondition is explained, where the default words do not fit. */
  readonly refusals?: Partial<Record<Precondition, string>>;
  execute(invocation: CommandInvocation, deps: Deps): Promise<string | CommandReply>;
}

/** A required option, or an error the router reports as a failure (the platform enforces required options). */
export function requiredOption(invocation: CommandInvocation, name: string): string {
  const value = invocation.option(name);
  if (value === null) throw new Error(`option ${name} is missing`);
  return value;
}
