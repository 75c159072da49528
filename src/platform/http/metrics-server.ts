import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { errorSummary } from '../errors.js';
import { listenProblem } from '../startup.js';
import { StatusPage } from './status-page.js';

export interface MetricsServer {
  /** Base URL: `/metrics` and the status page at `/`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * `/metrics` (Prometheus text format) and the operator status page on their own port, apart from
 * the API: a scrape never takes a connection or a handler from API requests, needs no token, and
 * is reachable only where the operator binds it (loopback by default).
 */
export async function serveMetrics(registry: Registry, host: string, port: number, log: Logger): Promise<MetricsServer> {
  const page = new StatusPage(registry);
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
        (err: unknown) => {
          log.error({ err: errorSummary(err) }, 'metrics scrape failed');
          res.writeHead(500, { 'Content-Type': 'text/plain' }).end('scrape failed\n');
        },
      );
      return;
    }
    if (path === '/') {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' }).end(page.render());
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found: /metrics or /\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(listenProblem(err, host, port, 'HERALD_METRICS_PORT') ?? err));
    server.listen(port, host, () => resolve());
  });
  page.start();
  const address = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
  log.info({ metrics_url: `${url}/metrics`, status_url: `${url}/` }, 'metrics listening');
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        page.stop();
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
