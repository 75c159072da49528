import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client } from './support/client.js';
import type { TestDatabase } from './support/db.js';
import { IDS, newRequestId, post } from './support/herald.js';
import { startPgCluster, type PgCluster } from './support/pg-cluster.js';
import { runHerald, type HeraldProcess } from './support/process.js';
import { crashRigOn } from './support/rigs.js';
import { waitFor, waitForDelivery } from './support/wait.js';

/**
 * PostgreSQL restarting under a running Herald, and Herald starting before PostgreSQL: real
 * `herald serve` processes on a throwaway cluster of their own (never the machine's server).
 */
describe('PostgreSQL restarts under herald serve', () => {
  let cluster: PgCluster;
  const rig = crashRigOn(() => freshDatabase(), {
    env: { HERALD_GATEWAY: 'off', HERALD_DISCORD_TIMEOUT_MS: '2000', HERALD_LEASE_MS: '5000', HERALD_RETRY_BASE_MS: '50' },
    // A test that stopped the cluster leaves it running again, so its database can be dropped.
    afterProcesses: async () => {
      if (cluster.port !== 0) await cluster.start().catch(() => undefined);
    },
  });
  const { sandbox, procs, bridgeToken, adminToken } = rig;

  beforeAll(async () => {
    cluster = await startPgCluster();
  });
  afterAll(async () => {
    await cluster?.destroy();
  });

  /** A fresh empty database on the throwaway cluster; Herald migrates it at start-up. */
  async function freshDatabase(): Promise<TestDatabase> {
    const name = `herald_r_${randomBytes(6).toString('hex')}`;
    await adminQuery(`create database ${name}`);
    const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-restart-'));
    return {
      databaseUrl: cluster.url(name),
      dataDir,
      drop: async () => {
        await adminQuery(`drop database if exists ${name} with (force)`).catch(() => undefined);
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  }
  async function adminQuery(text: string): Promise<void> {
    const c = new pg.Client({ connectionString: cluster.url() });
    await c.connect();
    await c.query(text).finally(() => c.end());
  }
  const messages = (content: string) => sandbox.allMessages().filter((m) => m.content === content);
  /** A request without the contract check of test/support/client.ts: the down-time answers are what is tested. */
  async function raw(url: string, method: string, p: string, body?: unknown): Promise<{ status: number; json: unknown }> {
    const res = await fetch(`${url}${p}`, {
      method,
      headers: { authorization: `Bearer ${bridgeToken}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = text;
    }
    return { status: res.status, json };
  }
  const isErrorBody = (json: unknown) => typeof json === 'object' && json !== null && typeof (json as { error?: unknown }).error === 'string';
  const alive = (p: HeraldProcess) => p.child.exitCode === null && p.child.signalCode === null;

  it('survives an immediate restart with requests in flight: 503 while down, accepts and delivers after', async () => {
    await rig.database();
    const proc = await procs.start(['serve'], rig.env());
    const url = proc.url ?? '';
    expect((await client(url, adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts })).status).toBe(200);
    const before = newRequestId();
    expect((await client(url, bridgeToken).post('/mcp/deliveries', post(before, `restart ${before}`))).status).toBe(202);
    await waitFor(() => messages(`restart ${before}`).length === 1, 'the first delivery');

    // Keep requests flowing (posts and reads, several at once) through the whole restart.
    const accepted: string[] = [before];
    const statuses = new Map<number, number>();
    const badBodies: string[] = [];
    let flowing = true;
    const worker = async () => {
      while (flowing) {
        const id = newRequestId();
        const res = await raw(url, 'POST', '/mcp/deliveries', post(id, `restart ${id}`)).catch(() => ({ status: -1, json: undefined }));
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 202) accepted.push(id);
        else if (!isErrorBody(res.json)) badBodies.push(`${res.status} ${JSON.stringify(res.json)}`);
        await raw(url, 'GET', `/mcp/deliveries/${id}`).catch(() => undefined);
      }
    };
    const workers = Array.from({ length: 4 }, worker);
    await waitFor(() => (statuses.get(202) ?? 0) >= 8, 'requests to flow');

    await cluster.stop('immediate');
    const down = await waitFor(async () => {
      const res = await raw(url, 'POST', '/mcp/deliveries', post(newRequestId(), 'while down'));
      return res.status === 503 ? res : undefined;
    }, 'a 503 while PostgreSQL is down', 15_000);
    expect(down.json).toEqual({ error: expect.any(String) });
    const ready = await raw(url, 'GET', '/readyz');
    expect(ready.status).toBe(503);
    expect(alive(proc)).toBe(true);

    await cluster.start();
    const after = newRequestId();
    await waitFor(async () => (await raw(url, 'POST', '/mcp/deliveries', post(after, `restart ${after}`))).status === 202, 'a 202 after the restart', 30_000);
    accepted.push(after);
    flowing = false;
    await Promise.all(workers);
    expect(alive(proc)).toBe(true);
    expect(badBodies).toEqual([]);
    expect([...statuses.keys()].filter((s) => s !== 202 && s !== 503), `statuses seen: ${JSON.stringify([...statuses])}`).toEqual([]);

    // Every accepted delivery reaches Discord exactly once. One whose attempt was in flight when the
    // server died could not record its outcome: it reads `unknown` once its lease ends, and the
    // agent's retry (the protocol's answer to unknown) re-drives it under the same nonce.
    const api = client(url, bridgeToken);
    for (const id of accepted) {
      const { state } = await waitForDelivery(api, id, ['delivered', 'unknown'], `${id.slice(0, 8)}… delivered or unknown`, 30_000);
      if (state === 'unknown') {
        expect((await api.post('/mcp/deliveries', post(id, `restart ${id}`))).status).toBe(202);
        await waitForDelivery(api, id, 'delivered', `${id.slice(0, 8)}… delivered after its retry`, 30_000);
      }
      expect(messages(`restart ${id}`)).toHaveLength(1);
    }
    // Ready again once LISTEN is back too (it reconnects with backoff, up to a few seconds).
    await waitFor(async () => (await api.get('/readyz')).status === 200, '/readyz to answer 200 again', 15_000);
    expect(alive(proc)).toBe(true);
  });

  it('re-establishes LISTEN after a restart: a new delivery wakes the dispatcher at once, not at the next poll', async () => {
    await rig.database();
    // Polling once a minute: only NOTIFY can deliver within the waits below.
    const proc = await procs.start(['serve'], rig.env({ HERALD_POLL_MS: '60000' }));
    const url = proc.url ?? '';
    const api = client(url, bridgeToken);
    expect((await client(url, adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts })).status).toBe(200);
    const readiness = async () => (await raw(url, 'GET', '/readyz')) as { status: number; json: { checks: Record<string, string> } };
    expect((await readiness()).json.checks['listen']).toBe('ok');
    const deliver = async (label: string) => {
      const id = newRequestId();
      expect((await api.post('/mcp/deliveries', post(id, `listen ${id}`))).status).toBe(202);
      await waitFor(() => messages(`listen ${id}`).length === 1, `${label} to be delivered by NOTIFY`, 10_000);
    };
    await deliver('a delivery before the restart');

    await cluster.stop('immediate');
    const down = await waitFor(async () => {
      const r = await readiness();
      return r.json.checks['listen'] === 'unavailable' ? r : undefined;
    }, '/readyz to report LISTEN down');
    expect(down.status).toBe(503);

    await cluster.start();
    const up = await waitFor(async () => {
      const r = await readiness();
      return r.status === 200 ? r : undefined;
    }, '/readyz to recover', 30_000);
    expect(up.json.checks).toMatchObject({ database: 'ok', listen: 'ok' });
    await deliver('a delivery after the restart');
    await deliver('another delivery after the restart');
    expect(proc.output()).toContain('LISTEN re-established');
    expect(alive(proc)).toBe(true);
  });

  it('starts while PostgreSQL is down or still starting up: waits, logging, and comes up with it', async () => {
    await rig.database();
    await cluster.stop('fast');
    // A server that answers every connection the way PostgreSQL does during start-up or recovery.
    const starting = await fakeStartingUpServer(cluster.port);
    const proc = procs.track(runHerald(['serve'], rig.env({ HERALD_DB_STARTUP_TIMEOUT_MS: '60000' })));
    await waitFor(() => proc.output().includes('the database system is starting up'), 'Herald to wait for a server starting up');
    expect(proc.output()).toContain('"msg":"database not reachable yet; waiting for it"');
    await new Promise<void>((resolve) => starting.close(() => resolve()));
    await waitFor(() => /ECONNREFUSED/.test(proc.output()), 'Herald to wait for a server that refuses connections');
    expect(alive(proc)).toBe(true);

    await cluster.start();
    const line = await waitFor(() => proc.output().split('\n').find((l) => l.includes('"msg":"herald started"')), 'Herald to start', 30_000);
    const url = (JSON.parse(line) as { url: string }).url;
    expect((await client(url, adminToken).put(`/admin/destinations/${IDS.guild}/alerts`, { channel_id: IDS.channels.alerts })).status).toBe(200);
    const id = newRequestId();
    expect((await client(url, bridgeToken).post('/mcp/deliveries', post(id, `startup ${id}`))).status).toBe(202);
    await waitFor(() => messages(`startup ${id}`).length === 1, 'the delivery');
  });

  it('gives up after HERALD_DB_STARTUP_TIMEOUT_MS with a message naming DATABASE_URL', async () => {
    await rig.database();
    await cluster.stop('fast');
    const proc = procs.track(runHerald(['serve'], rig.env({ HERALD_DB_STARTUP_TIMEOUT_MS: '1500' })));
    const exit = await proc.exited;
    // The operator fixes this (start PostgreSQL, or point DATABASE_URL at it): exit 2, like a configuration error.
    expect(exit.code).toBe(2);
    expect(proc.output()).toMatch(/herald: cannot reach the database at DATABASE_URL \(postgres:\/\/postgres@127\.0\.0\.1:\d+\/herald_r_\w+\) within 2 s \(HERALD_DB_STARTUP_TIMEOUT_MS\): connect ECONNREFUSED[^\n]*: start PostgreSQL there, or set DATABASE_URL to where it runs/);
    await cluster.start();
  });
});

/** Listens on `port` and refuses each connection with PostgreSQL's 57P03 "starting up" error. */
async function fakeStartingUpServer(port: number): Promise<Server> {
  const field = (type: string, value: string) => Buffer.concat([Buffer.from(type), Buffer.from(value), Buffer.from([0])]);
  const fields = Buffer.concat([field('S', 'FATAL'), field('V', 'FATAL'), field('C', '57P03'), field('M', 'the database system is starting up'), Buffer.from([0])]);
  const length = Buffer.alloc(4);
  length.writeInt32BE(fields.length + 4);
  const errorResponse = Buffer.concat([Buffer.from('E'), length, fields]);
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () => socket.end(errorResponse));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return server;
}
