import type { APIApplicationCommandOption, RESTPostAPIChatInputApplicationCommandsJSONBody } from 'discord.js';
import { DomainError } from '../../platform/errors.js';
import type { CommandInvocation } from '../../transports/transport.js';

export type { CommandInvocation };

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
  readonly preconditions: readonly Precondition[];
  /** By subcommand name; a command without subcommands uses the key ''. */
  readonly subcommands: Readonly<Record<string, SubcommandEntry>>;
  /** How a failed precondition is explained, where the default words do not fit. */
  readonly refusals?: Partial<Record<Precondition, string>>;
  execute(invocation: CommandInvocation, deps: Deps): Promise<string | CommandReply>;
}

const REFUSALS: Record<Precondition, string> = {
  in_guild: 'Use this command in a server.',
  manage_guild: 'You need the Manage Server permission for this command.',
  registered: 'Run `/agent register` first.',
  bot_can_post: 'Herald cannot post in that channel: it needs View Channel, Send Messages and Embed Links there.',
};

/** A required option, or an error the router reports as a failure (the platform enforces required options). */
export function requiredOption(invocation: CommandInvocation, name: string): string {
  const value = invocation.option(name);
  if (value === null) throw new Error(`option ${name} is missing`);
  return value;
}

/** The preconditions of one subcommand, the command's first. */
export function preconditionsOf(command: Command<unknown>, subcommand: string | null): Precondition[] {
  return [...command.preconditions, ...(command.subcommands[subcommand ?? '']?.preconditions ?? [])];
}

/** The subcommand options of a definition (empty when the command takes its options directly). */
export function subcommandOptions(definition: RESTPostAPIChatInputApplicationCommandsJSONBody): APIApplicationCommandOption[] {
  return (definition.options ?? []).filter((o) => o.type === 1);
}

/** How the router learns facts a precondition needs that the invocation does not carry. */
export interface PreconditionFacts {
  isRegistered(userId: string): Promise<boolean>;
  /**
   * Whether Herald can view, send and embed in a guild channel, from its own roles and the
   * channel's overwrites; undefined when the guild has no such channel (the command says why).
   */
  botCanPost(guildId: string, channelId: string): Promise<boolean | undefined>;
}

/** A precondition that does not hold, and how it is explained. */
export interface Refusal {
  precondition: Precondition;
  reason: string;
}

/**
 * Dispatches every command: one place checks preconditions and turns domain refusals into
 * replies. The gateway and `run_command` both go through it.
 */
export class CommandRouter<Deps> {
  private readonly byName: ReadonlyMap<string, Command<Deps>>;

  constructor(
    readonly commands: readonly Command<Deps>[],
    private readonly deps: Deps,
    private readonly facts: PreconditionFacts,
  ) {
    this.byName = new Map(commands.map((c) => [c.definition.name, c]));
  }

  command(name: string): Command<Deps> | undefined {
    return this.byName.get(name);
  }

  /** The first precondition of this invocation that does not hold, or undefined when all hold. */
  async refusal(command: Command<Deps>, invocation: CommandInvocation): Promise<Refusal | undefined> {
    for (const p of preconditionsOf(command as Command<unknown>, invocation.subcommand)) {
      let holds: boolean;
      if (p === 'in_guild') holds = invocation.guildId !== null;
      else if (p === 'manage_guild') holds = invocation.guildId !== null && invocation.canManageGuild;
      else if (p === 'bot_can_post') {
        const channelId = invocation.option('channel') ?? invocation.channelId;
        holds = invocation.guildId !== null && channelId !== null && (await this.facts.botCanPost(invocation.guildId, channelId)) !== false;
      } else holds = await this.facts.isRegistered(invocation.user.id);
      if (!holds) return { precondition: p, reason: command.refusals?.[p] ?? REFUSALS[p] };
    }
    return undefined;
  }

  /** Run a command whose preconditions hold: its reply, or a domain refusal in words (`refused`: nothing was changed). */
  async attempt(command: Command<Deps>, invocation: CommandInvocation): Promise<{ reply: CommandReply; refused: boolean }> {
    try {
      const reply = await command.execute(invocation, this.deps);
      return { reply: typeof reply === 'string' ? { content: reply } : reply, refused: false };
    } catch (err) {
      if (err instanceof DomainError) return { reply: { content: `That did not work: ${err.reason}.` }, refused: true };
      throw err;
    }
  }

  /** The reply to one invocation through the platform's own command surface, which answers only the invoking user (ephemeral), so a secret reply may be shown there. */
  async run(invocation: CommandInvocation): Promise<string> {
    const command = this.byName.get(invocation.name);
    if (command === undefined) return `Unknown command /${invocation.name}.`;
    const refusal = await this.refusal(command, invocation);
    if (refusal !== undefined) return refusal.reason;
    return (await this.attempt(command, invocation)).reply.content;
  }
}
