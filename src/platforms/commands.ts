// What a platform's command surface and its lookups of people and messages look like, in the
// platform's terms but none of its objects (re-exported by platform.ts).

/**
 * One invocation of a command, in the platform's terms but none of its objects: the platform's
 * command surface (Discord's gateway) builds it; permissions are what the platform computed,
 * never a caller's word.
 */
export interface CommandInvocation {
  readonly user: { readonly id: string; readonly username: string; readonly globalName: string | null };
  /** Null in a direct message. */
  readonly guildId: string | null;
  /** Where it was invoked (null when the platform does not say). */
  readonly channelId: string | null;
  /** The command's name as invoked, e.g. `agent`. */
  readonly name: string;
  readonly subcommand: string | null;
  /** A string or channel option's value (a channel option gives the channel id). */
  option(name: string): string | null;
  /** Whether the invoking member has Manage Server in this guild. */
  readonly canManageGuild: boolean;
  /** The platform it came through (a person registered there gets their DMs there); absent: the home one. */
  readonly platform?: string;
  /**
   * The bot it was invoked on (src/infra/policy/identity.ts), where Herald is several bots: a person
   * registers with, pairs with and unregisters from that bot. Absent: the default bot.
   */
  readonly identity?: string;
}

/** Someone invoking a command in a channel, as the platform knows them (never a caller's word). */
export interface CommandInvoker {
  readonly user: { readonly id: string; readonly username: string; readonly globalName: string | null; readonly bot: boolean };
  readonly guildId: string;
  readonly channelId: string;
  /** The member's permissions in the channel, by name, as the platform computes them (roles, overwrites, owner). */
  readonly permissions: readonly string[];
  readonly canManageGuild: boolean;
}

/** A message as the platform has it, for checking who wrote it. */
export interface FetchedMessage {
  readonly id: string;
  readonly channelId: string;
  readonly authorId: string;
  readonly authorIsBot: boolean;
  /** When it was written, as the platform dates it (Discord: the time in its snowflake id). */
  readonly createdAt: Date;
  /**
   * Whether its author wrote it: false for a system message the platform shows under their name
   * (Discord: a member joined, a pin, a boost, a thread created), which asks for nothing.
   */
  readonly writtenByAuthor: boolean;
}

/**
 * Resolving invokers of commands that do not come through the platform's own command surface
 * (`run_command`): the guild, channel, member, roles and overwrites come from the platform,
 * looked up with Herald's own session.
 */
export interface Invokers {
  /** Undefined `invoker`: what was not found (guild, channel in that guild, member). */
  resolve(userId: string, guildId: string, channelId: string): Promise<{ invoker: CommandInvoker } | { notFound: string }>;
  /** Undefined when the message does not exist in that channel or cannot be seen. */
  message(channelId: string, messageId: string): Promise<FetchedMessage | undefined>;
  /**
   * Whether Herald can view, send and embed in a channel of a guild; undefined when there is no
   * such channel in that guild (the command itself says what is wrong with it).
   */
  botCanPost(guildId: string, channelId: string): Promise<boolean | undefined>;
}

/** Answers a command invocation with the text of its (private) reply. */
export type CommandHandler = (invocation: CommandInvocation) => Promise<string>;

/**
 * A slash command as Herald's commands module defines it, for a platform's command surface to
 * offer: its name, what it does, and its options (subcommands, each with its own). Option types
 * are numbered as the commands are written (1 a subcommand, 2 a group of them, 3 a string, 7 a
 * channel; src/modules/commands/): a platform reads what it needs (Slack: the subcommands and
 * their options' order) and converts the rest to its own shape (Discord's folder).
 */
export interface CommandDefinition {
  readonly name: string;
  readonly description: string;
  readonly options?: readonly CommandOption[] | undefined;
}

/** One option of a command: a subcommand (with options of its own) or a value it takes. */
export interface CommandOption {
  readonly type: number;
  readonly name: string;
  readonly description: string;
  readonly required?: boolean | undefined;
  readonly options?: readonly CommandOption[] | undefined;
}
