import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { readJsonBody } from '../src/infra/http/body.js';
import { HttpMetrics } from '../src/infra/http/http.metrics.js';
import { closeServer, serveHttp } from '../src/infra/http/server.js';
import type { Api } from '../src/infra/http/api.js';
import { createLogger } from '../src/infra/log.js';
import { waitFor } from './support/wait.js';

/**
 * A client that sends less than its Content-Length and goes away: Koa reports the request's error,
 * and its own handler printed the stack to stderr, outside the JSON log (before any token was
 * checked: anyone could write there). Now it is one JSON line, at debug, and nothing on stderr.
 */
describe('the API server: a request the client ends early', () => {
  const lines: Record<string, unknown>[] = [];
  let server: Server;
  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString('utf8').split('\n')) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    // The body is read as the API reads it (src/infra/http/api.ts).
    const api = Object.assign(async (ctx: { req: import('node:http').IncomingMessage; status: number }) => {
      await readJsonBody(ctx.req);
      ctx.status = 204;
    }, { plain: () => false }) as unknown as Api;
    server = await serveHttp({ host: '127.0.0.1', port: 0 }, api, createLogger('debug', sink), new HttpMetrics(new Registry()));
  });
  afterAll(() => closeServer(server));

  it('logs it as JSON at debug, and prints no stack to stderr', async () => {
    const stderr = vi.spyOn(console, 'error');
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.end('POST /mcp/deliveries HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9999\r\n\r\n{}');
      });
      s.on('close', () => resolve());
      s.on('error', () => resolve());
      s.resume();
    });
    const line = await waitFor(() => lines.find((l) => l['msg'] === 'request ended by the client'), 'the JSON line');
    expect(line).toMatchObject({ level: 20, err: expect.stringContaining('Parse Error') });
    expect(stderr).not.toHaveBeenCalled();
  });
});
