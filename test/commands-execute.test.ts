import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimCommandRun, findCommandRun, finishCommandRun, pruneCommandRuns } from '../src/modules/commands/command-run.repository.js';
import { COMMAND_RUN_LEASE_MS } from '../src/modules/commands/command.service.js';
import { SANDBOX_MEMBER_IDS } from '../src/platforms/discord/sandbox/sandbox.js';
import { client } from './support/client.js';
import { onPostgres } from './support/db.js';
import { heraldEnv, IDS, startTestHerald, TestClock, type TestHerald } from './support/herald.js';
import { startHeraldProcess } from './support/process.js';
import { waitFor, waitForStateAt } from './support/wait.js';
import { tablesOf } from '../src/infra/db/tables.js';
import type { CommandRunResult, CommandsDb } from '../src/modules/commands/command-run.table.js';

type Result = {
  ok: boolean;
  mode: string;
  error: { category: string; reason: string } | null;
  outputs: { content: string; delivery?: { request_id: string } }[];
  sideEffectsMayHaveOccurred: boolean;
  replayed: boolean;
};

/** What a lapsed running row becomes, for the repository's own tests. */
const lapsed = (keepUntil: Date) => ({ result: { ok: false, error: { category: 'failed', reason: 'interrupted' } } as unknown as CommandRunResult, keepUntil });

let keys = 0;
const newKey = () => `test-key-${Date.now()}-${++keys}`.padEnd(16, '0');

describe('run_command: execute', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ env: { HERALD_COMMAND_EXECUTION_ENABLED: 'true', HERALD_COMMAND_TIMEOUT_MS: '1000' } });
  });
  afterAll(() => h.close());

  const said = (userId: string, content = 'please map alerts') => h.sandbox.writeAsUser(userId, IDS.channels.alerts, content).id;
  const run = async (body: Record<string, unknown>, bridge = h.bridge): Promise<Result> => {
    const res = await bridge.post('/mcp/commands/run', { userId: SANDBOX_MEMBER_IDS.manager, guildId: IDS.guild, channelId: IDS.channels.alerts, mode: 'execute', ...body });
    expect(res.status, res.text).toBe(200);
    return res.json as Result;
  };
  const mappings = async () => (await h.admin.get('/admin/destinations')).json as { items: { destination: string; channel_id: string }[] };

  it('executes /destinations set for a member with Manage Server, capturing the reply instead of posting it', async () => {
    const source = said(SANDBOX_MEMBER_IDS.manager);
    const before = h.sandbox.channelMessages(IDS.channels.alerts).length;
    const r = await run({ command: `destinations set alerts <#${IDS.channels.ops}>`, sourceMessageId: source, idempotencyKey: newKey() });
    expect(r).toMatchObject({ ok: true, mode: 'execute', error: null, sideEffectsMayHaveOccurred: true, replayed: false });
    expect(r.outputs).toEqual([{ type: 'message', content: `Posts to **alerts** now go to <#${IDS.channels.ops}>.`, embeds: [] }]);
    expect((await mappings()).items).toContainEqual({ guild_id: IDS.guild, destination: 'alerts', channel_id: IDS.channels.ops });
    expect(h.sandbox.channelMessages(IDS.channels.alerts)).toHaveLength(before);
  });

  it('refuses a member without Manage Server and changes nothing', async () => {
    const source = said(IDS.user);
    const r = await run({ userId: IDS.user, command: `destinations set deals <#${IDS.channels.ops}>`, sourceMessageId: source, idempotencyKey: newKey() });
    expect(r).toMatchObject({ ok: false, error: { category: 'unmet_precondition' }, sideEffectsMayHaveOccurred: false });
    expect((await mappings()).items.map((m) => m.destination)).not.toContain('deals');
  });

  it('needs a source message written by userId in channelId, fetched from Discord; bots are refused', async () => {
    const command = 'destinations list';
    expect(await run({ command, idempotencyKey: newKey() })).toMatchObject({ error: { category: 'source_message_required' } });
    expect(await run({ command, sourceMessageId: said(IDS.user), idempotencyKey: newKey() })).toMatchObject({ error: { category: 'source_message_invalid', reason: 'the source message was not written by userId' } });
    expect(await run({ command, sourceMessageId: '999999999999999999', idempotencyKey: newKey() })).toMatchObject({ error: { category: 'source_message_invalid' } });
    // A message in another channel is not a message in channelId.
    const elsewhere = h.sandbox.writeAsUser(SANDBOX_MEMBER_IDS.manager, IDS.channels.deals, 'hi').id;
    expect(await run({ command, sourceMessageId: elsewhere, idempotencyKey: newKey() })).toMatchObject({ error: { category: 'source_message_invalid' } });
    // A bot's message, and a bot as the invoker.
    const botMessage = said(SANDBOX_MEMBER_IDS.otherBot);
    expect(await run({ command, sourceMessageId: botMessage, idempotencyKey: newKey() })).toMatchObject({ error: { category: 'bot_refused', reason: 'the source message was written by a bot' } });
    expect(await run({ userId: SANDBOX_MEMBER_IDS.otherBot, command, sourceMessageId: botMessage, idempotencyKey: newKey() })).toMatchObject({ error: { category: 'bot_refused' } });
    expect(await run({ command, sourceMessageId: said(SANDBOX_MEMBER_IDS.manager) })).toMatchObject({ error: { category: 'idempotency_key_required' } });
  });

  it("refuses a system message Discord shows under the user's name (they joined) as consent, and spends nothing", async () => {
    const joined = h.sandbox.writeAsUser(SANDBOX_MEMBER_IDS.manager, IDS.channels.alerts, '', 7).id;
    const r = await run({ command: 'destinations clear ops', sourceMessageId: joined, idempotencyKey: newKey() });
    expect(r).toMatchObject({ ok: false, error: { category: 'source_message_invalid', reason: 'the source message is a system message (a join, a pin, a boost), not words userId wrote' }, sideEffectsMayHaveOccurred: false });
    // A reply is words the user wrote.
    const reply = h.sandbox.writeAsUser(SANDBOX_MEMBER_IDS.manager, IDS.channels.alerts, 'yes, list them', 19).id;
    expect(await run({ command: 'destinations list', sourceMessageId: reply, idempotencyKey: newKey() })).toMatchObject({ ok: true });
  });

  it('replays the stored result for the same key and invocation, and refuses the key for another invocation', async () => {
    const key = newKey();
    const invocation = { command: `destinations set digest <#${IDS.channels.ops}>`, sourceMessageId: said(SANDBOX_MEMBER_IDS.manager), idempotencyKey: key };
    const first = await run(invocation);
    expect(first).toMatchObject({ ok: true, replayed: false });
    // Changed in between: a replay must not run the command again.
    await h.admin.put(`/admin/destinations/${IDS.guild}/digest`, { channel_id: IDS.channels.deals });
    const again = await run(invocation);
    expect(again).toEqual({ ...first, replayed: true });
    expect((await mappings()).items).toContainEqual({ guild_id: IDS.guild, destination: 'digest', channel_id: IDS.channels.deals });
    expect(await run({ ...invocation, command: `destinations set digest <#${IDS.channels.alerts}>` })).toMatchObject({ ok: false, error: { category: 'idempotency_mismatch' } });
  });

  it('answers timed_out with sideEffectsMayHaveOccurred when the command outlives the timeout, and the final result under the key later', async () => {
    // Discord answers the channel lookups of /destinations set slowly: the bot_can_post check's,
    // then the command's own, which outlives the timeout.
    h.sandbox.inject({ method: 'GET', path: `^/channels/${IDS.channels.deals}$`, action: 'delay', ms: 2_000, times: 2 });
    const invocation = { command: `destinations set deals <#${IDS.channels.deals}>`, sourceMessageId: said(SANDBOX_MEMBER_IDS.manager), idempotencyKey: newKey() };
    const r = await run(invocation);
    expect(r).toMatchObject({ ok: false, error: { category: 'timed_out' }, sideEffectsMayHaveOccurred: true });
    // While it runs, the key answers in_progress; once it ends, the stored result.
    const final = await waitFor(async () => {
      const again = await run(invocation);
      return again.replayed ? again : undefined;
    }, 'the timed-out command to finish');
    expect(final).toMatchObject({ ok: true, sideEffectsMayHaveOccurred: true, outputs: [{ content: `Posts to **deals** now go to <#${IDS.channels.deals}>.` }] });
  });

  it('responseMode discord queues the reply in the outbox: one message, even when Discord fails after creating it and the execute is repeated', async () => {
    // Discord creates the reply but answers 500: it is sent again with the same nonce.
    const posts = () => h.sandbox.requests.filter((q) => q.method === 'POST' && q.path.endsWith(`/channels/${IDS.channels.alerts}/messages`));
    const postsBefore = posts().length;
    h.sandbox.inject({ method: 'POST', path: `^/channels/${IDS.channels.alerts}/messages$`, action: 'error_after_create', status: 500 });
    const invocation = { command: 'destinations list', sourceMessageId: said(SANDBOX_MEMBER_IDS.manager), idempotencyKey: newKey(), responseMode: 'discord' };
    const r = await run(invocation);
    expect(r).toMatchObject({ ok: true, sideEffectsMayHaveOccurred: true });
    const content = r.outputs[0]?.content ?? '';
    expect(content).toContain('**alerts**');
    const requestId = r.outputs[0]?.delivery?.request_id ?? '';
    expect(requestId).toMatch(/^[0-9a-f]{64}$/);
    expect(await run(invocation)).toMatchObject({ replayed: true });
    // Operators follow the reply as a delivery of kind reply; it is not one of the protocol's.
    const detail = await waitForStateAt(h.admin, `/admin/deliveries/${requestId}`, 'delivered', 'the reply to be delivered');
    expect(detail).toMatchObject({ kind: 'reply', target: { guild_id: IDS.guild, channel_id: IDS.channels.alerts } });
    expect(posts().slice(postsBefore).map((q) => q.status)).toEqual([500, 200]);
    expect((await h.bridge.get(`/mcp/deliveries/${requestId}`)).status).toBe(404);
    const posted = h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.author.id === h.sandbox.bot.id && m.content === content);
    expect(posted).toHaveLength(1);
  });

  it('never executes an identity command for a user: no registration, no pairing code, no revocation; the message is not spent', async () => {
    const user = SANDBOX_MEMBER_IDS.owner;
    await h.sandbox.invoke({ userId: user, guildId: IDS.guild, command: 'agent', subcommand: 'register' });
    const generation = ((await h.bridge.get(`/mcp/registration/${user}`)).json as { generation: string }).generation;
    const source = said(user, 'hi');
    for (const sub of ['register', 'pair', 'unregister']) {
      for (const responseMode of ['capture', 'discord']) {
        const r = await run({ userId: user, command: `agent ${sub}`, sourceMessageId: source, idempotencyKey: newKey(), responseMode });
        expect(r, `${sub} ${responseMode}`).toMatchObject({ ok: false, error: { category: 'slash_command_only' }, outputs: [], sideEffectsMayHaveOccurred: false });
      }
    }
    // Unregister did not run (same generation), pair issued nothing to post, and the message still authorises a command.
    expect((await h.bridge.get(`/mcp/registration/${user}`)).json).toEqual({ generation });
    expect(h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.content.includes('pairing code'))).toEqual([]);
    expect(await run({ userId: user, command: 'destinations list', sourceMessageId: source, idempotencyKey: newKey() })).toMatchObject({ ok: true });
  });

  it('frees a key once its replay window has passed, and prunes old runs', async () => {
    const db = h.herald.store.db;
    const t0 = new Date('2026-01-01T00:00:00Z');
    const at = (ms: number) => new Date(t0.getTime() + ms);
    const run = (invocationHash: string, now: number, expires: number) => ({ key: 'window-key-000000', invocationHash, now: at(now), expiresAt: at(expires), interrupted: lapsed(at(expires)) });
    const source = (messageId: string) => ({ messageId, keepUntil: at(60_000) });
    expect(await claimCommandRun(tablesOf<CommandsDb>(db), run('hash-a', 0, 60_000), source('900000000000000001'))).toBe('claimed');
    // It ran and finished: its result is replayed until its window ends.
    await finishCommandRun(tablesOf<CommandsDb>(db), 'window-key-000000', lapsed(at(0)).result, at(60_000));
    expect(await claimCommandRun(tablesOf<CommandsDb>(db), run('hash-b', 30_000, 90_000), source('900000000000000002'))).toBe('key_taken');
    // Past its window the key may be claimed again, even for another invocation (with another message).
    expect(await claimCommandRun(tablesOf<CommandsDb>(db), run('hash-b', 60_000, 120_000), source('900000000000000002'))).toBe('claimed');
    expect((await findCommandRun(tablesOf<CommandsDb>(db), 'window-key-000000'))?.invocation_hash).toBe('hash-b');
    expect(await pruneCommandRuns(tablesOf<CommandsDb>(db), at(120_000))).toBeGreaterThanOrEqual(1);
    expect(await findCommandRun(tablesOf<CommandsDb>(db), 'window-key-000000')).toBeUndefined();
  });

  it('claims a source message once, race-safe in the database: of many keys naming one message, one runs; the losers leave no row', async () => {
    const db = h.herald.store.db;
    const now = new Date();
    const keepUntil = new Date(now.getTime() + 3_600_000);
    const keys = Array.from({ length: 10 }, (_, i) => `race-key-${Date.now()}-${i}`.padEnd(16, '0'));
    const claims = await Promise.all(keys.map((key) => claimCommandRun(tablesOf<CommandsDb>(db), { key, invocationHash: `hash-${key}`, now, expiresAt: keepUntil, interrupted: lapsed(keepUntil) }, { messageId: '900000000000000010', keepUntil })));
    expect(claims.filter((c) => c === 'claimed')).toHaveLength(1);
    expect(claims.filter((c) => c === 'source_used')).toHaveLength(9);
    const rows = await Promise.all(keys.map((key) => findCommandRun(tablesOf<CommandsDb>(db), key)));
    expect(rows.filter((r) => r !== undefined)).toHaveLength(1);
    // The claim outlives the key's own row: once that is pruned, the message is still spent.
    await pruneCommandRuns(tablesOf<CommandsDb>(db), new Date(now.getTime() + 60_000));
    expect(await claimCommandRun(tablesOf<CommandsDb>(db), { key: 'race-key-late-00000', invocationHash: 'h', now, expiresAt: keepUntil, interrupted: lapsed(keepUntil) }, { messageId: '900000000000000010', keepUntil })).toBe('source_used');
  });

  it('takes a source message as consent to one command: another command or key naming it is refused, the same key still replays', async () => {
    // The reproduction: one greeting used for set, set and clear under new keys.
    const greeting = said(SANDBOX_MEMBER_IDS.manager, 'good morning everyone!');
    const key = newKey();
    const first = await run({ command: `destinations set alerts <#${IDS.channels.deals}>`, sourceMessageId: greeting, idempotencyKey: key });
    expect(first).toMatchObject({ ok: true, replayed: false });
    const used = { ok: false, error: { category: 'source_message_used' }, sideEffectsMayHaveOccurred: false, outputs: [] };
    expect(await run({ command: `destinations set ops <#${IDS.channels.deals}>`, sourceMessageId: greeting, idempotencyKey: newKey() })).toMatchObject(used);
    expect(await run({ command: 'destinations clear alerts', sourceMessageId: greeting, idempotencyKey: newKey() })).toMatchObject(used);
    // The same command under a new key is a second execution too.
    expect(await run({ command: `destinations set alerts <#${IDS.channels.deals}>`, sourceMessageId: greeting, idempotencyKey: newKey() })).toMatchObject(used);
    expect(await run({ command: `destinations set alerts <#${IDS.channels.deals}>`, sourceMessageId: greeting, idempotencyKey: key })).toEqual({ ...first, replayed: true });
    const mapped = (await mappings()).items;
    expect(mapped).toContainEqual({ guild_id: IDS.guild, destination: 'alerts', channel_id: IDS.channels.deals });
    expect(mapped.map((m) => m.destination)).not.toContain('ops');
    // Validating never spends a message.
    const fresh = said(SANDBOX_MEMBER_IDS.manager);
    expect(await run({ mode: 'validate', command: 'destinations list', sourceMessageId: fresh })).toMatchObject({ ok: true });
    expect(await run({ command: 'destinations list', sourceMessageId: fresh, idempotencyKey: newKey() })).toMatchObject({ ok: true });
  });

  it('lets one of several concurrent executes on one message run, whatever their keys', async () => {
    const source = said(SANDBOX_MEMBER_IDS.manager);
    const results = await Promise.all([IDS.channels.alerts, IDS.channels.deals, IDS.channels.ops].map((c) => run({ command: `destinations set digest <#${c}>`, sourceMessageId: source, idempotencyKey: newKey() })));
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    expect(results.filter((r) => r.error?.category === 'source_message_used')).toHaveLength(2);
  });

  // PGlite is one process's database: two processes need PostgreSQL.
  it.skipIf(!onPostgres)('replays and refuses across two Herald processes on one database', { timeout: 120_000 }, async () => {
    const other = await startHeraldProcess(
      ['serve'],
      heraldEnv({ sandbox: h.sandbox, db: h.db, bridgeToken: h.bridgeToken, adminToken: h.adminToken }, { HERALD_GATEWAY: 'off', HERALD_COMMAND_EXECUTION_ENABLED: 'true' }),
      100_000,
    );
    try {
      const otherBridge = client(other.url ?? '', h.bridgeToken);
      const invocation = { command: `destinations set ops <#${IDS.channels.ops}>`, sourceMessageId: said(SANDBOX_MEMBER_IDS.manager), idempotencyKey: newKey() };
      const first = await run(invocation);
      expect(first).toMatchObject({ ok: true, replayed: false });
      expect(await run(invocation, otherBridge)).toEqual({ ...first, replayed: true });
      expect(await run({ ...invocation, command: 'destinations clear ops' }, otherBridge)).toMatchObject({ error: { category: 'idempotency_mismatch' } });
      // The message is spent on every replica: another key on the other process is refused.
      expect(await run({ ...invocation, command: 'destinations clear ops', idempotencyKey: newKey() }, otherBridge)).toMatchObject({ error: { category: 'source_message_used' } });
      // Racing on one message across both processes, one execute runs.
      const source = said(SANDBOX_MEMBER_IDS.manager);
      const raced = await Promise.all(
        [h.bridge, otherBridge, h.bridge, otherBridge].map((b, i) => run({ command: `destinations set ${i % 2 === 0 ? 'deals' : 'digest'} <#${IDS.channels.ops}>`, sourceMessageId: source, idempotencyKey: newKey() }, b)),
      );
      expect(raced.filter((r) => r.ok)).toHaveLength(1);
      expect(raced.filter((r) => r.error?.category === 'source_message_used')).toHaveLength(3);
    } finally {
      other.kill('SIGKILL');
      await other.exited;
    }
  });

  it.skipIf(!onPostgres)('a command whose process is killed while it runs ends interrupted (failed) once its lease lapses, not in_progress for the replay window', { timeout: 120_000 }, async () => {
    const other = await startHeraldProcess(
      ['serve'],
      heraldEnv({ sandbox: h.sandbox, db: h.db, bridgeToken: h.bridgeToken, adminToken: h.adminToken }, { HERALD_GATEWAY: 'off', HERALD_COMMAND_EXECUTION_ENABLED: 'true', HERALD_COMMAND_TIMEOUT_MS: '1000' }),
      100_000,
    );
    try {
      // The bot_can_post check's channel lookup is answered at once, the command's own very slowly
      // (past the command's timeout, within Discord's): it is still running when its process dies.
      h.sandbox.inject({ method: 'GET', path: `^/channels/${IDS.channels.digest}$`, action: 'delay', ms: 1, times: 1 });
      h.sandbox.inject({ method: 'GET', path: `^/channels/${IDS.channels.digest}$`, action: 'delay', ms: 10_000, times: 1 });
      const invocation = { command: `destinations set digest <#${IDS.channels.digest}>`, sourceMessageId: said(SANDBOX_MEMBER_IDS.manager), idempotencyKey: newKey() };
      expect(await run(invocation, client(other.url ?? '', h.bridgeToken))).toMatchObject({ error: { category: 'timed_out' } });
      other.kill('SIGKILL');
      await other.exited;
      // Asked again on the surviving process: still running while its lease lasts, then a final answer.
      const final = await waitFor(async () => {
        const again = await run(invocation);
        expect(again.error?.category).toMatch(/^(in_progress|failed)$/);
        return again.error?.category === 'failed' ? again : undefined;
      }, 'the interrupted command to end', COMMAND_RUN_LEASE_MS + 15_000);
      expect(final).toMatchObject({ ok: false, error: { category: 'failed', reason: expect.stringContaining('stopped before it finished') }, sideEffectsMayHaveOccurred: true, replayed: true });
      // One answer for the key from then on.
      expect(await run(invocation)).toEqual(final);
    } finally {
      h.sandbox.clearFaults();
      other.kill('SIGKILL');
      await other.exited;
    }
  });
});

describe('run_command: execute needs a fresh source message', () => {
  let h: TestHerald;
  const clock = new TestClock();
  beforeAll(async () => {
    h = await startTestHerald({ clock, env: { HERALD_COMMAND_EXECUTION_ENABLED: 'true', HERALD_COMMAND_SOURCE_MAX_AGE_SECONDS: '120' } });
  });
  afterAll(() => h.close());

  const run = async (body: Record<string, unknown>): Promise<Result> => {
    const res = await h.bridge.post('/mcp/commands/run', { userId: SANDBOX_MEMBER_IDS.manager, guildId: IDS.guild, channelId: IDS.channels.alerts, mode: 'execute', ...body });
    expect(res.status, res.text).toBe(200);
    return res.json as Result;
  };
  const said = () => h.sandbox.writeAsUser(SANDBOX_MEMBER_IDS.manager, IDS.channels.alerts, 'please map ops').id;

  it("refuses a message older than HERALD_COMMAND_SOURCE_MAX_AGE_SECONDS by Discord's timestamp on Herald's clock, and runs nothing", async () => {
    clock.offsetMs = 0;
    const old = said();
    clock.offsetMs = 121_000;
    const r = await run({ command: `destinations set ops <#${IDS.channels.ops}>`, sourceMessageId: old, idempotencyKey: newKey() });
    expect(r).toMatchObject({ ok: false, error: { category: 'source_message_stale' }, sideEffectsMayHaveOccurred: false, outputs: [] });
    expect(r.error?.reason).toMatch(/^the source message is \d+ s old; an execute needs a message written in the last 120 s/);
    expect((await h.admin.get('/admin/destinations')).json).toEqual({ items: [] });
    // Inside the window (with room for a slow machine), it is consent.
    clock.offsetMs = 0;
    const recent = said();
    clock.offsetMs = 90_000;
    expect(await run({ command: `destinations set ops <#${IDS.channels.ops}>`, sourceMessageId: recent, idempotencyKey: newKey() })).toMatchObject({ ok: true });
  });

  it('still replays a key whose message has since grown old; a new key on it is refused as stale', async () => {
    clock.offsetMs = 0;
    const source = said();
    const invocation = { command: `destinations set deals <#${IDS.channels.ops}>`, sourceMessageId: source, idempotencyKey: newKey() };
    const first = await run(invocation);
    expect(first).toMatchObject({ ok: true });
    clock.offsetMs = 200_000;
    expect(await run(invocation)).toEqual({ ...first, replayed: true });
    expect(await run({ ...invocation, idempotencyKey: newKey() })).toMatchObject({ error: { category: 'source_message_stale' } });
  });

  it("refuses a message dated more than a minute ahead of Herald's clock (the clock is wrong, so no age can be trusted)", async () => {
    clock.offsetMs = 0;
    const source = said();
    clock.offsetMs = -120_000;
    const r = await run({ command: 'destinations list', sourceMessageId: source, idempotencyKey: newKey() });
    expect(r).toMatchObject({ ok: false, error: { category: 'source_message_stale' } });
    expect(r.error?.reason).toMatch(/ahead of Herald's clock/);
    clock.offsetMs = -30_000;
    expect(await run({ command: 'destinations list', sourceMessageId: source, idempotencyKey: newKey() })).toMatchObject({ ok: true });
    clock.offsetMs = 0;
  });
});

describe('run_command: execute disabled (the default)', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald();
  });
  afterAll(() => h.close());

  it('refuses execute, and runs nothing', async () => {
    const source = h.sandbox.writeAsUser(SANDBOX_MEMBER_IDS.manager, IDS.channels.alerts, 'map it').id;
    const res = await h.bridge.post('/mcp/commands/run', {
      command: `destinations set alerts <#${IDS.channels.ops}>`,
      userId: SANDBOX_MEMBER_IDS.manager,
      guildId: IDS.guild,
      channelId: IDS.channels.alerts,
      sourceMessageId: source,
      mode: 'execute',
      idempotencyKey: newKey(),
    });
    expect(res.json).toMatchObject({ ok: false, error: { category: 'execution_disabled' }, sideEffectsMayHaveOccurred: false });
    expect((await h.admin.get('/admin/destinations')).json).toEqual({ items: [] });
  });
});
