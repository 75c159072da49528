import type { Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import Koa from 'koa';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApi } from '../src/infra/http/api.js';
import { HttpMetrics } from '../src/infra/http/http.metrics.js';
import { probeOperations } from '../src/infra/http/probes.js';
import { closeServer, serveHttp } from '../src/infra/http/server.js';
import { createRegistry } from '../src/infra/metrics.js';
import { contractApi } from './support/client.js';

/** One raw HTTP/1.1 exchange on its own connection: the response's bytes, with its Date header dropped. */
async function raw(port: number, request: string): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.end(request);
  await new Promise((resolve) => socket.once('close', resolve));
  return Buffer.concat(chunks).toString('latin1').replace(/\r\nDate: [^\r]*/, '');
}

/**
 * The probes (`x-herald-plain` in openapi/probes.yaml) are answered before Koa builds a context
 * (src/infra/http/api.ts, plainRoutes): each answer must be the Koa path's, to the byte, and
 * counted in the request metrics as the others are.
 */
describe('plain routes', () => {
  let ready = true;
  let claimed = 0;
  const registry = createRegistry();
  let plain: Server;
  let viaKoa: Server;
  beforeAll(async () => {
    const others = (await contractApi()).getOperations().flatMap((op) => (op.operationId !== undefined ? [op.operationId] : []));
    const probes = probeOperations(async () => ({ database: ready ? 'ok' : 'connection refused' }));
    const api = await createApi({
      bridgeToken: undefined,
      adminToken: undefined,
      log: pino({ level: 'silent' }),
      operations: [probes, (kit) => Object.fromEntries(others.filter((id) => !(id in probes(kit))).map((id) => [id, () => ({ status: 500, body: { error: 'not in this test' } })]))],
    });
    // Counts the requests the plain routes answered (the rest went on to Koa).
    const own = api.plain;
    api.plain = (req, res, answered) => {
      const took = own(req, res, answered);
      if (took) claimed += 1;
      return took;
    };
    plain = await serveHttp({ host: '127.0.0.1', port: 0 }, api, pino({ level: 'silent' }), new HttpMetrics(registry));
    const app = new Koa();
    app.use(api);
    viaKoa = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => viaKoa.once('listening', resolve));
  });
  afterAll(async () => {
    await closeServer(plain);
    await closeServer(viaKoa);
  });

  const port = (s: Server): number => (s.address() as AddressInfo).port;
  const requests = [
    'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    'GET /healthz?probe=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    'GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    'GET /healthz HTTP/1.0\r\n\r\n',
    'HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    'POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    'GET /healthz/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
  ];

  it('answers each probe request as the Koa path does, byte for byte, ready or not', async () => {
    claimed = 0;
    for (const readiness of [true, false]) {
      ready = readiness;
      for (const request of requests) {
        const expected = await raw(port(viaKoa), request);
        expect(await raw(port(plain), request), request.split('\r\n')[0]).toBe(expected);
      }
    }
    // GET /healthz (twice), GET /readyz, the HTTP/1.0 GET: four a round; HEAD, POST and /healthz/ went to Koa.
    expect(claimed).toBe(8);
    expect(await raw(port(plain), requests[2] ?? '')).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\nContent-Type: application\/json; charset=utf-8\r\n/);
  });

  it('counts a probe in the request metrics under its operation', async () => {
    const before = (await registry.getSingleMetric('herald_http_requests_total')?.get())?.values.find((v) => v.labels['operation'] === 'getHealth' && v.labels['status'] === '200')?.value ?? 0;
    await raw(port(plain), requests[0] ?? '');
    const after = (await registry.getSingleMetric('herald_http_requests_total')?.get())?.values.find((v) => v.labels['operation'] === 'getHealth' && v.labels['status'] === '200')?.value ?? 0;
    expect(after).toBe(before + 1);
  });
});
