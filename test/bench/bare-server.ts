/**
 * The baselines' bare Node HTTP server (`npm run bench`): no framework, no validation, no auth.
 * `BENCH_MODE=healthz` answers every request 200 `{"status":"ok"}`; `BENCH_MODE=insert` parses the
 * JSON body and runs the single-row INSERT Herald's accept would, on a pool of BENCH_POOL
 * connections, answering 202 after the commit: the practical ceiling of an HTTP accept.
 * `BENCH_MODE=select` reads one delivery by its request_id (the last path segment) by primary key,
 * the ceiling of an HTTP read: on PostgreSQL through a pg pool of BENCH_POOL connections (Herald's
 * HERALD_DB_POOL_SIZE default), on PGlite (no DATABASE_URL) through the store in BENCH_DATA_DIR,
 * opened as Herald opens it.
 * Prints `listening <port>` when ready.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CompiledQuery } from 'kysely';
import pg from 'pg';
import { openStore } from '../../src/infra/db/database.js';
import { insertParams, INSERT_SQL } from './rows.js';

const mode = process.env['BENCH_MODE'] ?? 'healthz';
const databaseUrl = process.env['DATABASE_URL'] || undefined;
const SELECT_SQL = 'select * from deliveries where request_id = $1';
const pool = mode !== 'healthz' && databaseUrl !== undefined ? new pg.Pool({ connectionString: databaseUrl, max: Number(process.env['BENCH_POOL'] ?? 32) }) : undefined;
const pglite = mode === 'select' && databaseUrl === undefined ? await openStore({ databaseUrl: undefined, dataDir: process.env['BENCH_DATA_DIR'] ?? '' }) : undefined;
const select = async (id: string): Promise<unknown[]> =>
  pool !== undefined ? (await pool.query(SELECT_SQL, [id])).rows : ((await pglite?.db.executeQuery(CompiledQuery.raw(SELECT_SQL, [id])))?.rows ?? []);

const server = createServer((req, res) => {
  if (mode === 'healthz') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    return;
  }
  if (mode === 'select') {
    select(req.url?.split('/').pop() ?? '').then(
      (rows) => res.writeHead(rows.length > 0 ? 200 : 404, { 'content-type': 'application/json' }).end(JSON.stringify(rows[0] ?? { error: 'not found' })),
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    (pool as pg.Pool).query(INSERT_SQL, insertParams(body)).then(
      () => res.writeHead(202, { 'content-type': 'application/json' }).end('{"state":{"state":"pending"},"existing":false}'),
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  });
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${(server.address() as AddressInfo).port}`));
process.on('SIGTERM', () => {
  server.close();
  void Promise.all([pool?.end(), pglite?.close()]).finally(() => process.exit(0));
});
