import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { COMMAND_SOURCE_MAX_AGE_LIMIT_SECONDS, type CommandLimits } from './settings.js';
import type { Clock } from '../../infra/clock.js';
import { errorSummary } from '../../infra/errors.js';
import type { CommandsDb } from './command-run.table.js';
import type { CommandInvocation, CommandInvoker, FetchedMessage, Invokers } from '../../platforms/platform.js';
import { claimCommandRun, finishCommandRun, findCommandRun, renewCommandRun, type Claim } from './command-run.repository.js';
import type { CommandRunResult, CommandRunRow } from './command-run.table.js';
import type { Command, CommandRouter } from './command.js';
import { registryFingerprint, registryManifest, type CommandManifest } from './manifest.js';
import { parseCommand, type ParsedCommand } from './parse.js';

export type { CommandRunResult };
type ErrorCategory = NonNullable<CommandRunResult['error']>['category'];
type Output = CommandRunResult['outputs'][number];
type Answer = (error: CommandRunResult['error'], rest?: Partial<CommandRunResult>) => CommandRunResult;

/**
 * How far ahead of Herald's clock a source message may be dated (two clocks never agree exactly);
 * further ahead, Herald's clock is wrong and no age it measures can be trusted.
 */
const SOURCE_CLOCK_SKEW_MS = 60_000;
/**
 * A running command's lease in the database, renewed every third of it while its process runs it:
 * one that lapses lost its process (killed, or cut off from the database), and its key then
 * answers `failed` (interrupted) for good instead of `in_progress` until the replay window ends.
 */
export const COMMAND_RUN_LEASE_MS = 15_000;
const INTERRUPTED = 'the process running the command stopped before it finished (killed or cut off from the database); it may have done part of its work';

/** What a connector gets in place of a secret reply (the reply itself stays with the user). */
export const SECRET_WITHHELD = 'This reply is secret (a credential for the user alone), so Herald withholds it here and never posts it: the user sees it only in the reply to their own slash command.';

/** `run_command`'s input, as the contract's CommandRunRequest. */
export interface RunRequest {
  command: string;
  userId: string;
  guildId: string;
  channelId: string;
  sourceMessageId?: string | undefined;
  messageContent?: string | undefined;
  mode?: 'validate' | 'execute' | undefined;
  idempotencyKey?: string | undefined;
  responseMode?: 'capture' | 'discord' | undefined;
}

/** Queues a command's reply to its channel in the outbox; the same request id again is the same delivery. */
export type ReplyPoster = (requestId: string, guildId: string, channelId: string, content: string) => Promise<void>;

/** Discord could not be asked who the invoker is (down, timing out): the bridge answers 503. */
export class DiscordUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`discord unavailable: ${errorSummary(cause)}`);
    this.name = 'DiscordUnavailableError';
  }
}

function fromDiscord<T>(call: Promise<T>): Promise<T> {
  return call.catch((err: unknown) => {
    throw new DiscordUnavailableError(err);
  });
}

/** A counting semaphore without waiting: a full one refuses. */
class Slots {
  private used = 0;
  constructor(private readonly max: number) {}
  take(): boolean {
    if (this.used >= this.max) return false;
    this.used += 1;
    return true;
  }
  release(): void {
    this.used -= 1;
  }
}

/**
 * The command registry over MCP: list and describe from the manifest; run = parse like the slash
 * command, resolve the invoker through Herald's own Discord session (never the request's word),
 * check the same preconditions through the same router as the gateway, then either stop
 * (validate) or execute once per idempotency key, with the result kept in the database.
 */
export class CommandService<Deps> {
  readonly manifest: readonly CommandManifest[];
  readonly fingerprint: string;
  private readonly slots: Slots;

  constructor(
    private readonly router: CommandRouter<Deps>,
    private readonly invokers: Invokers,
    private readonly db: Kysely<CommandsDb>,
    private readonly clock: Clock,
    private readonly limits: CommandLimits,
    private readonly log: Logger,
    private readonly postReply: ReplyPoster | undefined,
  ) {
    this.manifest = registryManifest(router.commands as readonly Command<unknown>[]);
    this.fingerprint = registryFingerprint(router.commands as readonly Command<unknown>[]);
    this.slots = new Slots(limits.concurrency);
  }

  /** A visible command by name or alias. */
  describe(nameOrAlias: string): CommandManifest | undefined {
    const n = nameOrAlias.toLowerCase();
    return this.manifest.find((c) => c.name === n || c.aliases.includes(n));
  }

  async run(request: RunRequest): Promise<CommandRunResult> {
    const started = performance.now();
    const mode = request.mode ?? 'validate';
    let matched: CommandRunResult['command'] = null;
    const answer = (error: CommandRunResult['error'], rest: Partial<CommandRunResult> = {}): CommandRunResult => ({
      ok: error === null,
      mode,
      command: matched,
      error,
      elapsedMs: Math.round(performance.now() - started),
      outputs: [],
      sideEffectsMayHaveOccurred: false,
      replayed: false,
      ...rest,
    });
    const refuse = (category: ErrorCategory, reason: string, extra: Omit<NonNullable<CommandRunResult['error']>, 'category' | 'reason'> = {}) =>
      answer({ category, reason, ...extra });

    if (request.command.length > this.limits.maxLength) return refuse('too_long', `command is longer than ${this.limits.maxLength} characters`);
    if ((request.messageContent?.length ?? 0) > this.limits.maxLength) return refuse('too_long', `messageContent is longer than ${this.limits.maxLength} characters`);

    const parsed = parseCommand(request.command, this.manifest);
    if ('category' in parsed) return refuse(parsed.category, parsed.reason, parsed.argument !== undefined ? { argument: parsed.argument } : {});
    matched = {
      name: parsed.command.name,
      subcommand: parsed.subcommand.name,
      ...(parsed.alias !== undefined ? { alias: parsed.alias } : {}),
      usage: parsed.subcommand.usage,
      preconditions: parsed.subcommand.preconditions,
      effects: parsed.subcommand.effects,
    };
    const command = this.router.command(parsed.command.name);
    if (command === undefined) return refuse('unknown_command', `no command ${parsed.command.name}`);
    // Consent that only the user can give (pairing a connector, registering, revoking) is never
    // given by a connector on their behalf, whatever the mode: only their own slash command runs it.
    if (parsed.subcommand.slashCommandOnly) {
      const slash = `/${[parsed.command.name, parsed.subcommand.name].filter((n) => n !== '').join(' ')}`;
      return refuse('slash_command_only', `${slash} runs only from the user's own slash command in Discord (its reply is for them alone), never on their behalf: ask them to run ${slash} themselves`);
    }

    if (mode === 'execute') {
      if (!this.limits.executionEnabled) return refuse('execution_disabled', 'executing commands is disabled on this Herald (HERALD_COMMAND_EXECUTION_ENABLED); validate only');
      if (request.sourceMessageId === undefined) return refuse('source_message_required', 'execute needs sourceMessageId: the user\'s message in channelId that asked for this');
      if (request.idempotencyKey === undefined) return refuse('idempotency_key_required', 'execute needs an idempotencyKey (16-128 characters)');
    }

    // Who is asking, and what they may do, from Discord itself.
    const found = await fromDiscord(this.invokers.resolve(request.userId, request.guildId, request.channelId));
    if ('notFound' in found) return refuse('context_not_found', found.notFound);
    const { invoker } = found;
    if (invoker.user.bot) return refuse('bot_refused', 'bots cannot invoke commands');
    const invocation = invocationOf(invoker, parsed);
    // A precondition may ask Discord (bot_can_post): its failure is Discord unavailable, like the lookups above.
    const refusal = await fromDiscord(this.router.refusal(command, invocation));
    if (refusal !== undefined) return refuse('unmet_precondition', refusal.reason, { precondition: refusal.precondition });
    // Replies posted to the channel need Herald's own permissions there, whatever the command.
    if (request.responseMode === 'discord' && (await fromDiscord(this.invokers.botCanPost(request.guildId, request.channelId))) !== true) {
      return refuse('unmet_precondition', 'Herald cannot post its reply in channelId: it needs View Channel, Send Messages and Embed Links there (or use responseMode capture).', { precondition: 'bot_can_post' });
    }
    if (mode === 'validate') return answer(null);

    // execute: the source message must be the user's own, as Discord has it.
    const source = await fromDiscord(this.invokers.message(request.channelId, request.sourceMessageId ?? ''));
    if (source === undefined) return refuse('source_message_invalid', 'sourceMessageId is not a message in channelId');
    if (source.authorIsBot) return refuse('bot_refused', 'the source message was written by a bot');
    if (source.authorId !== request.userId) return refuse('source_message_invalid', 'the source message was not written by userId');
    if (!source.writtenByAuthor) return refuse('source_message_invalid', 'the source message is a system message (a join, a pin, a boost), not words userId wrote');
    return this.executeOnce(request, command, invocation, source, answer);
  }

  /**
   * Execute once per key, and once per source message: the message is the user's consent to one
   * command, given just now. A stale message is refused (unless this key already ran: its replay);
   * the key and the message are claimed together in the database, so no other key, in this process
   * or another, can run a command on the same message.
   */
  private async executeOnce(request: RunRequest, command: Command<Deps>, invocation: CommandInvocation, source: FetchedMessage, answer: Answer): Promise<CommandRunResult> {
    const key = request.idempotencyKey ?? '';
    const hash = invocationHash(request);
    const now = this.clock.now();
    const keepMs = this.limits.idempotencyMinutes * 60_000;
    const stale = this.staleness(source, now);
    if (stale !== undefined) {
      const earlier = await findCommandRun(this.db, key);
      if (earlier !== undefined && (earlier.expires_at > now || earlier.status === 'running')) return this.earlierRun(earlier, hash, answer, now);
      return answer({ category: 'source_message_stale', reason: stale });
    }
    if (!this.slots.take()) return answer({ category: 'busy', reason: `${this.limits.concurrency} commands are running; try again shortly with the same key` });
    let claim: Claim;
    try {
      // A running row outlives a process that died while it ran by the timeout, then frees its key.
      // The message's claim outlives every window that could still accept it, whatever the setting.
      const keepUntil = new Date(Math.max(source.createdAt.getTime(), now.getTime()) + COMMAND_SOURCE_MAX_AGE_LIMIT_SECONDS * 1000 + SOURCE_CLOCK_SKEW_MS);
      const interrupted = { result: answer({ category: 'failed', reason: INTERRUPTED }, { sideEffectsMayHaveOccurred: true }), keepUntil: new Date(now.getTime() + keepMs) };
      claim = await claimCommandRun(this.db, { key, invocationHash: hash, now, expiresAt: new Date(now.getTime() + COMMAND_RUN_LEASE_MS), interrupted }, { messageId: source.id, keepUntil });
    } catch (err) {
      this.slots.release();
      throw err;
    }
    if (claim !== 'claimed') {
      this.slots.release();
      if (claim === 'source_used') {
        return answer({ category: 'source_message_used', reason: 'this source message already authorised an execute (one message, one command); the user must ask again in a new message' });
      }
      const existing = await findCommandRun(this.db, key);
      if (existing === undefined) return answer({ category: 'in_progress', reason: 'this idempotencyKey was just released; try again' }, { sideEffectsMayHaveOccurred: true });
      return this.earlierRun(existing, hash, answer, now);
    }
    // The lease says this process still runs it; lapsed, the key answers interrupted.
    const beat = setInterval(() => {
      renewCommandRun(this.db, key, new Date(this.clock.now().getTime() + COMMAND_RUN_LEASE_MS)).catch((err: unknown) => this.log.warn({ err: errorSummary(err) }, 'could not renew a running command\'s lease'));
    }, COMMAND_RUN_LEASE_MS / 3);
    beat.unref();

    const effectful = !(command.subcommands[invocation.subcommand ?? '']?.effects ?? []).every((e) => e === 'read_only');
    const work = (async (): Promise<CommandRunResult> => {
      try {
        const { reply, refused } = await this.router.attempt(command, invocation);
        // A secret reply goes no further than this line: not returned, posted, stored or logged.
        const output: Output = reply.secret === true ? { type: 'message', content: SECRET_WITHHELD, embeds: [], secret: true } : { type: 'message', content: reply.content, embeds: [] };
        const { outputs, truncated } = this.capture([output]);
        if (request.responseMode === 'discord' && this.postReply !== undefined) {
          for (const [i, o] of outputs.entries()) {
            if (o.secret === true) continue;
            const requestId = createHash('sha256').update(`command-reply\0${key}\0${i}`).digest('hex');
            await this.postReply(requestId, invocation.guildId ?? '', request.channelId, o.content);
            o.delivery = { request_id: requestId };
          }
        }
        return answer(null, { outputs, ...(truncated ? { outputsTruncated: true } : {}), sideEffectsMayHaveOccurred: (effectful && !refused) || request.responseMode === 'discord' });
      } catch (err) {
        this.log.error({ command: command.definition.name, err: errorSummary(err) }, 'command failed');
        return answer({ category: 'failed', reason: 'the command failed; it may have done part of its work' }, { sideEffectsMayHaveOccurred: true });
      }
    })();
    // The slot and the key stay taken until the command ends, timed out or not; then its result is stored.
    void work
      .then((result) => finishCommandRun(this.db, key, result, new Date(this.clock.now().getTime() + keepMs)))
      .catch((err: unknown) => this.log.error({ err: errorSummary(err) }, 'could not store a command result; its key frees when it expires'))
      .finally(() => {
        clearInterval(beat);
        this.slots.release();
      });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.limits.timeoutMs);
    });
    const first = await Promise.race([work, timeout]);
    clearTimeout(timer);
    if (first === 'timeout') {
      return answer(
        { category: 'timed_out', reason: `the command did not finish in ${this.limits.timeoutMs} ms; it goes on, and its result will be stored under this idempotencyKey` },
        { sideEffectsMayHaveOccurred: true },
      );
    }
    return first;
  }

  /** Why a source message is too old (or dated too far ahead) to authorise a command now; undefined when fresh. */
  private staleness(source: FetchedMessage, now: Date): string | undefined {
    const ageMs = now.getTime() - source.createdAt.getTime();
    const maxS = this.limits.sourceMaxAgeSeconds;
    if (ageMs > maxS * 1000) {
      return `the source message is ${Math.floor(ageMs / 1000)} s old; an execute needs a message written in the last ${maxS} s (HERALD_COMMAND_SOURCE_MAX_AGE_SECONDS): the user must ask again`;
    }
    if (-ageMs > SOURCE_CLOCK_SKEW_MS) return `the source message is dated ${Math.ceil(-ageMs / 1000)} s ahead of Herald's clock; Herald's clock must be wrong`;
    return undefined;
  }

  /** The answer for a key that already ran (or runs): its result again, or why not. */
  private earlierRun(existing: CommandRunRow, hash: string, answer: Answer, now: Date): CommandRunResult {
    if (existing.invocation_hash !== hash) return answer({ category: 'idempotency_mismatch', reason: 'this idempotencyKey was used for a different invocation' });
    if (existing.status === 'done' && existing.result !== null) return { ...existing.result, replayed: true };
    // Its lease lapsed: the answer the next claim of the key stores, given now.
    if (existing.expires_at <= now) return { ...answer({ category: 'failed', reason: INTERRUPTED }, { sideEffectsMayHaveOccurred: true }), replayed: true };
    return answer({ category: 'in_progress', reason: 'the command for this idempotencyKey is still running; ask again with the same key' }, { sideEffectsMayHaveOccurred: true });
  }

  /** Outputs within the limits of count and bytes, in order. */
  private capture(all: Output[]): { outputs: Output[]; truncated: boolean } {
    const outputs: Output[] = [];
    let bytes = 0;
    for (const o of all) {
      const size = Buffer.byteLength(JSON.stringify(o));
      if (outputs.length >= this.limits.maxOutputs || bytes + size > this.limits.maxOutputBytes) return { outputs, truncated: true };
      outputs.push(o);
      bytes += size;
    }
    return { outputs, truncated: false };
  }
}

/** The invocation the command sees: the parsed options, and who and where from Discord. */
function invocationOf(invoker: CommandInvoker, parsed: ParsedCommand): CommandInvocation {
  return {
    user: { id: invoker.user.id, username: invoker.user.username, globalName: invoker.user.globalName },
    guildId: invoker.guildId,
    channelId: invoker.channelId,
    name: parsed.command.name,
    subcommand: parsed.subcommand.name === '' ? null : parsed.subcommand.name,
    option: (name) => parsed.options[name] ?? null,
    canManageGuild: invoker.canManageGuild,
  };
}

/** What makes two executes the same invocation (the key aside). */
function invocationHash(r: RunRequest): string {
  const canonical = JSON.stringify([r.command.trim(), r.userId, r.guildId, r.channelId, r.sourceMessageId ?? null, r.responseMode ?? 'capture']);
  return createHash('sha256').update(canonical).digest('hex');
}
