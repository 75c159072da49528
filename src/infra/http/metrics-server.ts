import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { errorSummary } from '../errors.js';
import { listenProblem } from '../startup.js';
import type { CapabilityRow, PlatformRow } from './status-overview.js';
import { STATUS_PAGE_CSP, StatusPage, type ApiPage } from './status-page.js';

export interface MetricsServer {
  /** Base URL: `/metrics` and the status page at `/`. */
  readonly url: string;
  close(): Promise<void>;
}

export interface MetricsServerOptions {
  /** Where this process's API listens, when it serves one, and which of its pages the status page links. */
  api?: { host: string; port: number; pages: readonly ApiPage[] } | undefined;
  /** When this Herald started: the status page shows its uptime. */
  startedAt?: Date;
  /** What is on, and the platforms with who Herald is there: the status page's first tables. */
  capabilities?: readonly CapabilityRow[];
  platforms?: readonly PlatformRow[];
}

/**
 * `/metrics` (Prometheus text format) and the operator status page on their own port, apart from
 * the API: a scrape never takes a connection or a handler from API requests, needs no token, and
 * is reachable only where the operator binds it (loopback by default).
 */
export async function serveMetrics(registry: Registry, host: string, port: number, log: Logger, options: MetricsServerOptions = {}): Promise<MetricsServer> {
  const page = new StatusPage(registry, {
    apiPages: options.api?.pages ?? [],
    ...(options.startedAt !== undefined ? { startedAt: options.startedAt } : {}),
    ...(options.capabilities !== undefined ? { capabilities: options.capabilities } : {}),
    ...(options.platforms !== undefined ? { platforms: options.platforms } : {}),
  });
  const server: Server = createServer((req, res) => {
    const [path, query] = (req.url ?? '/').split('?');
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
      const refresh = new URLSearchParams(query ?? '').get('refresh') !== 'off';
      page.view({ apiUrl: options.api === undefined ? undefined : apiUrl(options.api, req.headers.host), refresh }).then(
        (html) =>
          res
            .writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store', 'Content-Security-Policy': STATUS_PAGE_CSP, 'X-Content-Type-Options': 'nosniff' })
            .end(html),
        (err: unknown) => {
          log.error({ err: errorSummary(err) }, 'status page failed');
          res.writeHead(500, { 'Content-Type': 'text/plain' }).end('status page failed\n');
        },
      );
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

/**
 * The API's base URL as the reader of the status page can open it: an API bound to every interface
 * (0.0.0.0, ::) is reached on the host name the reader used for this page.
 */
export function apiUrl(api: { host: string; port: number }, pageHost: string | undefined): string {
  let host = api.host;
  if (host === '0.0.0.0' || host === '::' || host === '') {
    const seen = pageHost === undefined ? undefined : /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::[0-9]+)?$/.exec(pageHost)?.[1];
    host = seen ?? (host === '::' ? '::1' : '127.0.0.1');
  }
  if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
  return `http://${host}:${api.port}`;
}
