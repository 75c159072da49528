import { existsSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPgCluster, type PgCluster } from './support/pg-cluster.js';

async function query(url: string, sql: string): Promise<unknown> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await c.connect();
  try {
    return (await c.query(sql)).rows[0];
  } finally {
    await c.end();
  }
}

describe('throwaway PostgreSQL cluster (test support)', () => {
  let cluster: PgCluster;
  beforeAll(async () => {
    cluster = await startPgCluster();
  });
  afterAll(() => cluster.destroy());

  it('serves on its own port, stops and starts again, and leaves nothing behind', async () => {
    expect(cluster.port).not.toBe(5432);
    expect(await query(cluster.url(), 'select 1 as one')).toEqual({ one: 1 });
    expect(await query(cluster.url(), 'show fsync')).toEqual({ fsync: 'off' });
    await query(cluster.url(), 'create database extra');
    expect(await query(cluster.url('extra'), 'select current_database() as db')).toEqual({ db: 'extra' });

    await cluster.stop('immediate');
    await expect(query(cluster.url(), 'select 1')).rejects.toThrow(/ECONNREFUSED/);
    await cluster.start();
    expect(await query(cluster.url('extra'), 'select 2 as two')).toEqual({ two: 2 });
    await cluster.stop('fast');
    await cluster.start();

    await cluster.destroy();
    await cluster.destroy();
    expect(existsSync(cluster.dir)).toBe(false);
    await expect(query(cluster.url(), 'select 1')).rejects.toThrow(/ECONNREFUSED/);
  });
});
