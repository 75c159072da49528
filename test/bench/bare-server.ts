/**
 * The baselines' bare Node HTTP server (`npm run bench`): no framework, no validation, no auth.
 * `BENCH_MODE=healthz` answers every request 200 `{"status":"ok"}`; `BENCH_MODE=insert` parses the
 * JSON body and runs the single-row INSERT Herald's accept would, on a pool of BENCH_POOL
 * connections, answering 202 after the commit: the practical ceiling of an HTTP accept.
 * `BENCH_MODE=select` reads one delivery by its request_id (the last path segment), the ceiling of
 * an HTTP read.
 * Prints `listening <port>` when ready.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { insertParams, INSERT_SQL } from './rows.js';

const mode = process.env['BENCH_MODE'] ?? 'healthz';
const pool = mode !== 'healthz' ? new pg.Pool({ connectionString: process.env['DATABASE_URL'], max: Number(process.env['BENCH_POOL'] ?? 32) }) : undefined;

const server = createServer((req, res) => {
  if (pool === undefined) {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    return;
  }
  if (mode === 'select') {
    pool.query('select * from deliveries where request_id = $1', [req.url?.split('/').pop() ?? '']).then(
      (r) => res.writeHead(r.rows.length > 0 ? 200 : 404, { 'content-type': 'application/json' }).end(JSON.stringify(r.rows[0] ?? { error: 'not found' })),
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    pool.query(INSERT_SQL, insertParams(body)).then(
      () => res.writeHead(202, { 'content-type': 'application/json' }).end('{"state":{"state":"pending"},"existing":false}'),
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  });
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${(server.address() as AddressInfo).port}`));
process.on('SIGTERM', () => {
  server.close();
  void pool?.end();
  process.exit(0);
});
