import type { APIApplicationCommandOption, RESTPostAPIChatInputApplicationCommandsJSONBody } from 'discord.js';
import { DomainError } from '../../infra/errors.js';
import type { CommandInvocation } from '../../platforms/platform.js';
import type { Command, CommandReply, Precondition } from '../command-types.js';

export type { CommandInvocation };
// The command types live on the modules' floor (src/modules/command-types.ts), which contract.ts re-exports.
export { PRECONDITIONS, requiredOption, type Command, type CommandReply, type Effect, type Precondition, type SubcommandEntry } from '../command-types.js';

const REFUSALS: Record<Precondition, string> = {
  in_guild: 'Use this command in a server.',
  manage_guild: 'You need the Manage Server permission for this command.',
  registered: 'Run `/agent register` first.',
  bot_can_post: 'Herald cannot post in that channel: it needs View Channel, Send Messages and Embed Links there.',
};

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
  /** Whether the user is registered with `identity`'s bot (absent: the default one), the bot invoked. */
  isRegistered(userId: string, identity?: string): Promise<boolean>;
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
      } else holds = await this.facts.isRegistered(invocation.user.id, invocation.identity);
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
