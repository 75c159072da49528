import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommandLimits } from '../../src/modules/commands/settings.js';
import { CommandRouter, type Command } from '../../src/modules/commands/command.js';
import { CommandService, type ReplyPoster } from '../../src/modules/commands/command.service.js';
import type { CommandDeps } from '../support/services.js';
import { agentCommand } from '../../src/modules/identity/agent.command.js';
import type { Invokers } from '../../src/platforms/platform.js';
import { CHANNEL, GUILD, startServices, USER, type Services } from '../support/services.js';
import { tablesOf } from '../../src/infra/db/tables.js';
import type { CommandsDb } from '../../src/modules/commands/command-run.table.js';

/** A pairing code as /agent pair issues it (docs/protocol.md §7). */
const CODE = /[ABCDEFGHJKMNPQRSTVWXYZ23456789]{27}/;

const LIMITS: CommandLimits = {
  executionEnabled: true,
  timeoutMs: 10_000,
  concurrency: 4,
  maxLength: 2_000,
  maxOutputs: 100,
  maxOutputBytes: 2 * 1024 * 1024,
  idempotencyMinutes: 10,
  sourceMaxAgeSeconds: 300,
};

/** run_command's service on the memory platform: who is asking and their messages come from it. */
describe('run_command (service level, memory transport): secret replies', () => {
  let s: Services;
  let service: CommandService<CommandDeps>;
  const posted: { requestId: string; content: string }[] = [];
  const logs: string[] = [];
  beforeAll(async () => {
    s = await startServices();
    const invokers: Invokers = {
      resolve: async (userId, guildId, channelId) => ({ invoker: { user: { id: userId, username: 'ada', globalName: 'Ada', bot: false }, guildId, channelId, permissions: [], canManageGuild: false } }),
      message: async (channelId, messageId) => {
        const m = s.memory.messagesIn(channelId).find((x) => x.id === messageId);
        return m === undefined ? undefined : { id: m.id, channelId, authorId: m.authorId, authorIsBot: false, createdAt: m.createdAt, writtenByAuthor: true };
      },
      botCanPost: async () => true,
    };
    // Defence in depth: /agent with its slash-command-only marks lifted, as if a change let a
    // connector run it. The command's own secret flag must still keep the code to the user.
    const lifted: Command<CommandDeps> = {
      ...agentCommand,
      subcommands: Object.fromEntries(Object.entries(agentCommand.subcommands).map(([name, entry]) => [name, { ...entry, slashCommandOnly: false }])),
    };
    const router = new CommandRouter<CommandDeps>([lifted], { identity: s.identity, destinations: s.destinations }, { isRegistered: async () => true, botCanPost: async () => true });
    const postReply: ReplyPoster = async (requestId, _guildId, _channelId, content) => void posted.push({ requestId, content });
    const log = pino({ level: 'trace' }, { write: (line: string) => void logs.push(line) });
    service = new CommandService(router, invokers, tablesOf<CommandsDb>(s.store.db), { now: () => new Date() }, LIMITS, log, postReply);
  });
  afterAll(() => s.close());

  it('never posts, returns, stores or logs a reply the command marked secret, even where the command may run', async () => {
    await s.identity.register({ id: USER, username: 'ada', globalName: 'Ada' });
    const source = s.memory.receive(CHANNEL, USER, 'pair my agent please').messageId;
    const request = { command: 'agent pair', userId: USER, guildId: GUILD, channelId: CHANNEL, sourceMessageId: source, mode: 'execute', idempotencyKey: 'secret-test-key-0001', responseMode: 'discord' } as const;
    const r = await service.run(request);
    // It ran: a code was issued for the user (only its hash is kept)...
    expect(r).toMatchObject({ ok: true, error: null });
    expect(await s.store.db.selectFrom('pairing_codes').select('user_id').where('user_id', '=', USER).execute()).toHaveLength(1);
    // ...but the code went nowhere: not in the answer, not to the channel, not in command_runs.
    expect(r.outputs).toEqual([{ type: 'message', content: expect.stringContaining('This reply is secret') as unknown, embeds: [], secret: true }]);
    expect(JSON.stringify(r)).not.toMatch(CODE);
    expect(posted).toEqual([]);
    expect(s.memory.messagesIn(CHANNEL).filter((m) => m.authorId === s.memory.selfUserId)).toEqual([]);
    const stored = await s.store.db.selectFrom('command_runs').select('result').where('idempotency_key', '=', request.idempotencyKey).executeTakeFirstOrThrow();
    expect(JSON.stringify(stored.result)).not.toMatch(CODE);
    expect(stored.result?.outputs).toEqual(r.outputs);
    // A replay answers the same withheld output.
    expect(await service.run(request)).toEqual({ ...r, replayed: true });
    expect(logs.join('\n')).not.toMatch(CODE);
  });

  it('keeps ordinary replies as they were: captured, and posted with responseMode discord', async () => {
    const before = posted.length;
    const source = s.memory.receive(CHANNEL, USER, 'register me').messageId;
    const r = await service.run({ command: 'agent register', userId: USER, guildId: GUILD, channelId: CHANNEL, sourceMessageId: source, mode: 'execute', idempotencyKey: 'secret-test-key-0002', responseMode: 'discord' });
    expect(r.outputs).toMatchObject([{ content: 'Already registered — nothing changed.' }]);
    expect(r.outputs[0]?.secret).toBeUndefined();
    expect(posted.slice(before).map((p) => p.content)).toEqual(['Already registered — nothing changed.']);
  });
});
