import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimCommandRun, findCommandRun, pruneCommandRuns } from '../src/modules/commands/command-run.repository.js';
import { SANDBOX_MEMBER_IDS } from '../src/sandbox/sandbox.js';
import { client } from './support/client.js';
import { onPostgres } from './support/db.js';
import { heraldEnv, IDS, startTestHerald, type TestHerald } from './support/herald.js';
import { startHeraldProcess } from './support/process.js';
import { waitFor } from './support/wait.js';

type Result = {
  ok: boolean;
  mode: string;
  error: { category: string; reason: string } | null;
  outputs: { content: string; delivery?: { request_id: string } }[];
  sideEffectsMayHaveOccurred: boolean;
  replayed: boolean;
};

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
    const detail = await waitFor(async () => {
      const d = (await h.admin.get(`/admin/deliveries/${requestId}`)).json as { state: string };
      return d.state === 'delivered' ? d : undefined;
    }, 'the reply to be delivered');
    expect(detail).toMatchObject({ kind: 'reply', target: { guild_id: IDS.guild, channel_id: IDS.channels.alerts } });
    expect(posts().slice(postsBefore).map((q) => q.status)).toEqual([500, 200]);
    expect((await h.bridge.get(`/mcp/deliveries/${requestId}`)).status).toBe(404);
    const posted = h.sandbox.channelMessages(IDS.channels.alerts).filter((m) => m.author.id === h.sandbox.bot.id && m.content === content);
    expect(posted).toHaveLength(1);
  });

  it('frees a key once its replay window has passed, and prunes old runs', async () => {
    const db = h.herald.store.db;
    const t0 = new Date('2026-01-01T00:00:00Z');
    expect(await claimCommandRun(db, 'window-key-000000', 'hash-a', t0, new Date(t0.getTime() + 60_000))).toBe(true);
    expect(await claimCommandRun(db, 'window-key-000000', 'hash-b', new Date(t0.getTime() + 30_000), new Date(t0.getTime() + 90_000))).toBe(false);
    // Past its window the key may be claimed again, even for another invocation.
    expect(await claimCommandRun(db, 'window-key-000000', 'hash-b', new Date(t0.getTime() + 60_000), new Date(t0.getTime() + 120_000))).toBe(true);
    expect((await findCommandRun(db, 'window-key-000000'))?.invocation_hash).toBe('hash-b');
    expect(await pruneCommandRuns(db, new Date(t0.getTime() + 120_000))).toBeGreaterThanOrEqual(1);
    expect(await findCommandRun(db, 'window-key-000000')).toBeUndefined();
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
    } finally {
      other.kill('SIGKILL');
      await other.exited;
    }
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
