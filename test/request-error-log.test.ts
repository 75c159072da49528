import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { logRequestError } from '../src/infra/http/server.js';
import { createLogger } from '../src/infra/log.js';

/** A request Koa reports failed is logged with its method and path, so an operator can tell which one it was. */
describe('a failed request in the log', () => {
  function lines(write: (log: ReturnType<typeof createLogger>) => void): Record<string, unknown>[] {
    const out = new PassThrough();
    const chunks: string[] = [];
    out.on('data', (d: Buffer) => chunks.push(d.toString()));
    write(createLogger('debug', out));
    return chunks.join('').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  }

  it('names the method and path (not the query), at error when Herald failed and at debug when the client went away', () => {
    const [failed, gone] = lines((log) => {
      logRequestError(log, new Error('Premature close'), { method: 'GET', path: '/mcp/files/abc' });
      logRequestError(log, Object.assign(new Error('aborted'), { code: 'ECONNRESET' }), { method: 'POST', path: '/mcp/files' });
    });
    expect(failed).toMatchObject({ level: 50, method: 'GET', path: '/mcp/files/abc', msg: 'request failed', err: 'Error: Premature close' });
    expect(gone).toMatchObject({ level: 20, method: 'POST', path: '/mcp/files', msg: 'request ended by the client' });
  });
});
