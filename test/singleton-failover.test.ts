import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { client } from './support/client.js';
import { onPostgres } from './support/db.js';
import { IDS, newRequestId, post } from './support/herald.js';
import type { HeraldProcess } from './support/process.js';
import { crashRig } from './support/rigs.js';
import { waitFor, waitForDelivery } from './support/wait.js';

const MANAGE_GUILD = String(1 << 5);

/** The `herald started` line's metrics URL. */
function metricsUrlOf(p: HeraldProcess): string {
  const line = p.output().split('\n').find((l) => l.includes('"msg":"herald started"')) ?? '{}';
  return (JSON.parse(line) as { metrics?: string }).metrics ?? '';
}

/**
 * Two `herald serve` replicas on one PostgreSQL: one Discord gateway session between them, held
 * under the `discord:gateway` lease, and taken over by the other replica when its holder is killed.
 */
describe.skipIf(!onPostgres)('the Discord gateway session across two replicas', () => {
  const rig = crashRig();
  const { sandbox, procs, bridgeToken, adminToken } = rig;

  const readyz = async (p: HeraldProcess) => {
    const res = await client(p.url ?? '', bridgeToken).get('/readyz');
    return { status: res.status, body: res.json as { status: string; checks: Record<string, string>; singletons?: Record<string, string> } };
  };
  const list = async () => (await sandbox.invoke({ userId: IDS.user, guildId: IDS.guild, command: 'destinations', subcommand: 'list', permissions: MANAGE_GUILD })).data?.content;

  it('only the holder opens a session; after a SIGKILL the other opens one within 15 s and answers commands once', async () => {
    const db = await rig.database();
    const env = rig.env();
    const first = await procs.start(['serve'], env);
    await waitFor(() => sandbox.gatewaySessions === 1, 'the first replica on the gateway', 30_000);
    const second = await procs.start(['serve'], env);
    await waitFor(async () => (await readyz(second)).body.singletons?.['discord:gateway']?.startsWith('standby (held by ') === true, 'the second replica on standby', 10_000);

    // Both are ready; only the first holds the session, and says so.
    const [r1, r2] = [await readyz(first), await readyz(second)];
    expect(r1).toMatchObject({ status: 200, body: { status: 'ok', checks: { gateway: 'ok' }, singletons: { 'discord:gateway': 'held' } } });
    expect(r2.status).toBe(200);
    expect(r2.body.checks['gateway']).toMatch(/^standby \(held by .+\)$/);
    const metrics1 = await (await fetch(`${metricsUrlOf(first)}/metrics`)).text();
    const metrics2 = await (await fetch(`${metricsUrlOf(second)}/metrics`)).text();
    expect(metrics1).toContain('herald_singleton_held{name="discord:gateway"} 1');
    expect(metrics2).toContain('herald_singleton_held{name="discord:gateway"} 0');
    // Longer than a lease: the standby never opens a second session while the holder lives.
    await new Promise((r) => setTimeout(r, 9_000));
    expect(sandbox.gatewaySessions).toBe(1);
    expect(await list()).toBe('No destinations are mapped in this server yet. Use `/destinations set`.');

    // The holder dies without giving the lease up.
    const killed = performance.now();
    first.kill('SIGKILL');
    await first.exited;
    await waitFor(() => sandbox.gatewaySessions === 0, 'the killed replica\'s session to be gone', 10_000);
    await waitFor(() => sandbox.gatewaySessions === 1 && sandbox.commands.length > 0, 'the second replica on the gateway', 20_000);
    const takeoverMs = performance.now() - killed;
    console.log(`discord:gateway takeover after SIGKILL: ${Math.round(takeoverMs)} ms`);
    expect(takeoverMs).toBeLessThan(15_000);
    await waitFor(async () => (await readyz(second)).body.singletons?.['discord:gateway'] === 'held', 'the second replica to say it holds the session', 5_000);

    // A command after the takeover: one session, one answer.
    expect(sandbox.gatewaySessions).toBe(1);
    expect(await list()).toBe('No destinations are mapped in this server yet. Use `/destinations set`.');
    // Ready once the session's connection finished (its slash commands registered again): the
    // sandbox still lists the first replica's commands, and a command can be answered a moment before.
    await waitFor(async () => (await readyz(second)).body.checks?.['gateway'] === 'ok', 'the second replica ready', 10_000);
    expect((await readyz(second)).body).toMatchObject({ status: 'ok', checks: { gateway: 'ok' } });

    // The nonce ledger follows the session: the new holder records what its sends created.
    expect((await client(second.url ?? '', adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts })).status).toBe(200);
    const id = newRequestId();
    expect((await client(second.url ?? '', bridgeToken).post('/mcp/deliveries', post(id, `after takeover ${id}`))).status).toBe(202);
    await waitForDelivery(client(second.url ?? '', bridgeToken), id, 'delivered');
    const created = sandbox.allMessages().filter((m) => m.content === `after takeover ${id}`);
    expect(created).toHaveLength(1);
    const pgc = new pg.Client({ connectionString: db.databaseUrl });
    await pgc.connect();
    try {
      await waitFor(async () => (await pgc.query('select 1 from sent_messages where message_id = $1', [created[0]?.id])).rowCount === 1, 'the nonce recorded by the new holder', 10_000);
    } finally {
      await pgc.end();
    }
  }, 120_000);
});
