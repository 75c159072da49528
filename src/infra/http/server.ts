import { createServer, type Server } from 'node:http';
import Router from '@koa/router';
import Koa from 'koa';
import type { Logger } from 'pino';
import { clientCaused, errorSummary } from '../errors.js';
import { listenProblem } from '../startup.js';
import { parseTraceparent } from '../trace.js';
import { docsRouter } from './docs.js';
import type { Api } from './api.js';
import type { HttpMetrics } from './http.metrics.js';

/** The API's HTTP server: the contract's operations, `/docs`, and the routes outside the contract. */
export async function serveHttp(
  where: { host: string; port: number },
  api: Api,
  log: Logger,
  metrics: HttpMetrics,
  routers: readonly Router[] = [],
): Promise<Server> {
  const answered = (operation: string | undefined, status: number, ms: number, method: string, path: string, traceparent: unknown): void => {
    metrics.request(operation, status, ms / 1000);
    // Method, path and status only: never bodies or headers (they hold content and tokens). A
    // caller's W3C trace id beside them when its `traceparent` is well formed (never the raw value).
    // At debug: a synchronous line per request would cost a sixth of the throughput.
    if (log.isLevelEnabled('debug')) {
      const trace = parseTraceparent(traceparent);
      log.debug({ method, path, status, ms: Math.round(ms), ...(trace === undefined ? {} : { trace_id: trace.trace_id }) }, 'request');
    }
  };
  const app = new Koa({ proxy: false });
  app.use(async (ctx, next) => {
    const started = performance.now();
    await next();
    answered(ctx.state['operation'] as string | undefined, ctx.status, performance.now() - started, ctx.method, ctx.path, ctx.get('traceparent'));
  });
  // Koa's own handler would print an error's stack to stderr, outside the JSON log: a client that
  // goes away mid-body (a request shorter than its Content-Length) could write there at will.
  app.on('error', (err: unknown, ctx?: { method: string; path: string }) => logRequestError(log, err, ctx));
  app.use(api);
  const docs = docsRouter(() => api.contract.yaml());
  const router = new Router();
  router.get('/', (ctx) => ctx.redirect('/docs'));
  app.use(docs.routes()).use(router.routes());
  for (const r of routers) app.use(r.routes());
  const koa = app.callback();
  // The probes are answered before Koa builds a context for them (src/infra/http/api.ts, plainRoutes).
  const server = createServer((req, res) => {
    if (!api.plain(req, res, (operation, status, ms) => answered(operation, status, ms, 'GET', (req.url ?? '').split('?')[0] ?? '', req.headers.traceparent))) void koa(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(listenProblem(err, where.host, where.port, 'PORT') ?? err));
    server.listen(where.port, where.host, () => resolve());
  });
  return server;
}

/** Stop accepting requests, and end idle keep-alive connections so the close does not wait on them. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}

/**
 * An error Koa reports for a request, in the JSON log with its method and path (never the query, a
 * body or a header), so the line says which request it was: at debug when the client caused it.
 */
export function logRequestError(log: Logger, err: unknown, request?: { method: string; path: string }): void {
  const where = request !== undefined ? { method: request.method, path: request.path } : {};
  if (clientCaused(err)) log.debug({ ...where, err: errorSummary(err) }, 'request ended by the client');
  else log.error({ ...where, err: errorSummary(err) }, 'request failed');
}
