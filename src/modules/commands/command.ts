import type { RESTPostAPIChatInputApplicationCommandsJSONBody } from 'discord.js';
import { DomainError } from '../../platform/errors.js';
import type { CommandInvocation } from '../../transports/transport.js';

export type { CommandInvocation };

/** What must hold before a command runs; checked by the router, never by the command itself. */
export type Precondition = 'in_guild' | 'manage_guild';

/** One command: its definition, preconditions and what it does. Its reply is the returned text. */
export interface Command<Deps> {
  /** The slash command, built with discord.js's builders. */
  readonly definition: RESTPostAPIChatInputApplicationCommandsJSONBody;
  readonly preconditions: readonly Precondition[];
  /** How a failed precondition is explained, where the default words do not fit. */
  readonly refusals?: Partial<Record<Precondition, string>>;
  execute(invocation: CommandInvocation, deps: Deps): Promise<string>;
}

const REFUSALS: Record<Precondition, string> = {
  in_guild: 'Use this command in a server.',
  manage_guild: 'You need the Manage Server permission for this command.',
};

/** A required option, or an error the router reports as a failure (the platform enforces required options). */
export function requiredOption(invocation: CommandInvocation, name: string): string {
  const value = invocation.option(name);
  if (value === null) throw new Error(`option ${name} is missing`);
  return value;
}

/** Dispatches every command: one place checks preconditions and turns domain refusals into replies. */
export class CommandRouter<Deps> {
  private readonly byName: ReadonlyMap<string, Command<Deps>>;

  constructor(
    readonly commands: readonly Command<Deps>[],
    private readonly deps: Deps,
  ) {
    this.byName = new Map(commands.map((c) => [c.definition.name, c]));
  }

  /** The reply to one invocation. */
  async run(invocation: CommandInvocation): Promise<string> {
    const command = this.byName.get(invocation.name);
    if (command === undefined) return `Unknown command /${invocation.name}.`;
    for (const p of command.preconditions) {
      const holds = p === 'in_guild' ? invocation.guildId !== null : invocation.guildId !== null && invocation.canManageGuild;
      if (!holds) return command.refusals?.[p] ?? REFUSALS[p];
    }
    try {
      return await command.execute(invocation, this.deps);
    } catch (err) {
      if (err instanceof DomainError) return `That did not work: ${err.reason}.`;
      throw err;
    }
  }
}
