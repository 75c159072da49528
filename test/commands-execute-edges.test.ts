import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_MEMBER_IDS } from '../src/platforms/discord/sandbox/sandbox.js';
import { IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/**
 * run_command execute at its edges, through HTTP against a Herald and its sandbox Discord: a full
 * set of slots, a key whose command still runs, outputs over the byte limit, a command that throws,
 * Discord not answering, and a messageContent over the limits.
 */

type Result = {
  ok: boolean;
  mode: string;
  error: { category: string; reason: string } | null;
  outputs: { content: string }[];
  outputsTruncated?: boolean;
  sideEffectsMayHaveOccurred: boolean;
  replayed: boolean;
};

let keys = 0;
const newKey = () => `edge-key-${Date.now()}-${++keys}`.padEnd(16, '0');

/** The requests and helpers every describe below uses on its own Herald. */
function harness(get: () => TestHerald) {
  const said = (content = 'please do it') => get().sandbox.writeAsUser(SANDBOX_MEMBER_IDS.manager, IDS.channels.alerts, content).id;
  const call = (body: Record<string, unknown>) =>
    get().bridge.post('/mcp/commands/run', { userId: SANDBOX_MEMBER_IDS.manager, guildId: IDS.guild, channelId: IDS.channels.alerts, mode: 'execute', ...body });
  const run = async (body: Record<string, unknown>): Promise<Result> => {
    const res = await call(body);
    expect(res.status, res.text).toBe(200);
    return res.json as Result;
  };
  /** Discord answers the command's own lookup of `channelId` slowly (`ms`), the precondition's lookup before it at once. */
  const slowCommandLookup = (channelId: string, ms: number) => {
    get().sandbox.inject({ method: 'GET', path: `^/channels/${channelId}$`, action: 'delay', ms: 0, times: 1 });
    get().sandbox.inject({ method: 'GET', path: `^/channels/${channelId}$`, action: 'delay', ms, times: 1 });
  };
  /** The stored result of a key, once its command has ended. */
  const finished = (invocation: Record<string, unknown>) =>
    waitFor(async () => {
      const again = await run(invocation);
      return again.replayed ? again : undefined;
    }, `the command under ${String(invocation['idempotencyKey'])} to finish`);
  const mappings = async () => ((await get().admin.get('/admin/destinations')).json as { items: { destination: string; channel_id: string }[] }).items;
  return { said, call, run, slowCommandLookup, finished, mappings };
}

describe('run_command execute: slots, keys still running, failures, Discord away', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ env: { HERALD_COMMAND_EXECUTION_ENABLED: 'true', HERALD_COMMAND_TIMEOUT_MS: '1000', HERALD_COMMAND_CONCURRENCY: '2' } });
  });
  afterAll(() => h?.close());
  const { said, call, run, slowCommandLookup, finished, mappings } = harness(() => h);

  it('answers in_progress (side effects may have occurred) for the same key while its command still runs, then its result', async () => {
    slowCommandLookup(IDS.channels.deals, 8_000);
    const invocation = { command: `destinations set deals <#${IDS.channels.deals}>`, sourceMessageId: said(), idempotencyKey: newKey() };
    expect(await run(invocation)).toMatchObject({ ok: false, error: { category: 'timed_out' }, sideEffectsMayHaveOccurred: true, replayed: false });
    // The command still runs (its lookup is answered 8 s after it began, room for a loaded machine): the key is taken.
    const again = await run(invocation);
    expect(again).toMatchObject({
      ok: false,
      error: { category: 'in_progress', reason: 'the command for this idempotencyKey is still running; ask again with the same key' },
      outputs: [],
      sideEffectsMayHaveOccurred: true,
      replayed: false,
    });
    const final = await finished(invocation);
    expect(final).toMatchObject({ ok: true, error: null, outputs: [{ content: `Posts to **deals** now go to <#${IDS.channels.deals}>.` }] });
  });

  it('answers busy when every slot runs a command, spending neither the key nor the message; the same key runs once a slot is free', async () => {
    slowCommandLookup(IDS.channels.deals, 8_000);
    slowCommandLookup(IDS.channels.ops, 8_000);
    const slow = [
      { command: `destinations set digest <#${IDS.channels.deals}>`, sourceMessageId: said(), idempotencyKey: newKey() },
      { command: `destinations set ops <#${IDS.channels.ops}>`, sourceMessageId: said(), idempotencyKey: newKey() },
    ];
    const first = await Promise.all(slow.map((s) => run(s)));
    expect(first.map((r) => r.error?.category)).toEqual(['timed_out', 'timed_out']);
    // Both slots are held by the commands that outlived the timeout.
    const waiting = { command: 'destinations list', sourceMessageId: said(), idempotencyKey: newKey() };
    const busy = await run(waiting);
    expect(busy).toMatchObject({ ok: false, error: { category: 'busy', reason: '2 commands are running; try again shortly with the same key' }, outputs: [], sideEffectsMayHaveOccurred: false, replayed: false });
    // A key still running is not answered in_progress while no slot is free: busy first.
    expect(await run(slow[0] ?? {})).toMatchObject({ error: { category: 'busy' } });
    for (const s of slow) expect(await finished(s)).toMatchObject({ ok: true });
    // Busy claimed nothing: the same key and message now run the command.
    const ran = await run(waiting);
    expect(ran).toMatchObject({ ok: true, error: null, replayed: false });
    expect(ran.outputs[0]?.content).toContain(`**ops** → <#${IDS.channels.ops}>`);
  });

  it('answers failed (side effects may have occurred) when the command throws, and replays that under the key without running it again', async () => {
    // Every Discord failure inside a command is a refusal in words; what throws is the store. Its
    // table moved away for a moment makes `destinations set` throw past the command.
    const db = h.herald.store.db;
    const invocation = { command: `destinations set alerts <#${IDS.channels.ops}>`, sourceMessageId: said(), idempotencyKey: newKey() };
    let r: Result;
    await sql`alter table destinations rename to destinations_away`.execute(db);
    try {
      r = await run(invocation);
    } finally {
      await sql`alter table destinations_away rename to destinations`.execute(db);
    }
    expect(r).toMatchObject({ ok: false, error: { category: 'failed', reason: 'the command failed; it may have done part of its work' }, outputs: [], sideEffectsMayHaveOccurred: true, replayed: false });
    // The failure is the key's result: a repeat replays it, and does not run the command again.
    expect(await run(invocation)).toEqual({ ...r, replayed: true });
    expect((await mappings()).map((m) => m.destination)).not.toContain('alerts');
  });

  // The bot_can_post precondition asks Discord too: its failure is the contract's 503, not an
  // undeclared 500 (it was, before command.service.ts wrapped the precondition check).
  it('answers 503 discord unavailable when Discord fails the bot_can_post check', async () => {
    h.sandbox.inject({ method: 'GET', path: `^/channels/${IDS.channels.digest}$`, action: 'error', status: 503, times: 50 });
    let res: Awaited<ReturnType<typeof call>>;
    try {
      res = await call({ mode: 'validate', command: `destinations set digest <#${IDS.channels.digest}>` });
    } finally {
      h.sandbox.clearFaults();
    }
    expect(res.status).toBe(503);
    expect(res.text).toBe('{"error":"discord unavailable"}');
  });

  it("answers 503 discord unavailable when Discord cannot be asked who invokes, and spends nothing", async () => {
    const source = said();
    const invocation = { command: 'destinations list', sourceMessageId: source, idempotencyKey: newKey() };
    h.sandbox.inject({ method: 'GET', path: `^/guilds/${IDS.guild}$`, action: 'error', status: 503, times: 50 });
    let res: Awaited<ReturnType<typeof call>>;
    try {
      res = await call(invocation);
    } finally {
      h.sandbox.clearFaults();
    }
    expect(res.status).toBe(503);
    expect(res.text).toBe('{"error":"discord unavailable"}');
    // Nothing was claimed: the same key and message run once Discord answers.
    expect(await run(invocation)).toMatchObject({ ok: true, replayed: false });
  });

  it('refuses a messageContent over the schema limit with a 400 naming the field, and one over HERALD_COMMAND_MAX_LENGTH as too_long', async () => {
    const over = await call({ mode: 'validate', command: 'destinations list', messageContent: 'x'.repeat(4001) });
    expect(over.status).toBe(400);
    expect(over.text).toBe('{"error":"messageContent must be a string"}');
    const long = await run({ mode: 'validate', command: 'destinations list', messageContent: 'x'.repeat(2001) });
    expect(long).toMatchObject({ ok: false, error: { category: 'too_long', reason: 'messageContent is longer than 2000 characters' } });
    // At the limit it is accepted.
    expect(await run({ mode: 'validate', command: 'destinations list', messageContent: 'x'.repeat(2000) })).toMatchObject({ ok: true });
  });
});

describe('run_command execute: outputs over HERALD_COMMAND_MAX_OUTPUT_BYTES', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ env: { HERALD_COMMAND_EXECUTION_ENABLED: 'true', HERALD_COMMAND_MAX_OUTPUT_BYTES: '100' } });
  });
  afterAll(() => h?.close());
  const { said, run } = harness(() => h);

  it('drops the outputs past the limit and says outputsTruncated, in the answer and its replay; a short one is kept whole', async () => {
    // A short reply (95 bytes as JSON) fits.
    const set = await run({ command: `destinations set alerts <#${IDS.channels.ops}>`, sourceMessageId: said(), idempotencyKey: newKey() });
    expect(set).toMatchObject({ ok: true, outputs: [{ content: `Posts to **alerts** now go to <#${IDS.channels.ops}>.` }] });
    expect(set.outputsTruncated).toBeUndefined();
    // A longer one (about 130 bytes) does not: the command ran, only its reply was dropped.
    const invocation = { command: 'destinations clear alerts', sourceMessageId: said(), idempotencyKey: newKey() };
    const r = await run(invocation);
    expect(r).toMatchObject({ ok: true, error: null, outputs: [], outputsTruncated: true, sideEffectsMayHaveOccurred: true });
    expect(await run(invocation)).toEqual({ ...r, replayed: true });
    expect((await h.admin.get('/admin/destinations')).json).toEqual({ items: [] });
  });
});
