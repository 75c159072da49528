import { createServer, type Server } from 'node:http';
import Router from '@koa/router';
import Koa from 'koa';
import type { Logger } from 'pino';
import { listenProblem } from '../startup.js';
import { docsRouter } from './docs.js';
import type { HttpMetrics } from './http.metrics.js';

/** The API's HTTP server: the contract's operations, `/docs`, and the routes outside the contract. */
export async function serveHttp(
  where: { host: string; port: number },
  api: Koa.Middleware,
  log: Logger,
  metrics: HttpMetrics,
  routers: readonly Router[] = [],
): Promise<Server> {
  const app = new Koa({ proxy: false });
  app.use(async (ctx, next) => {
    const started = performance.now();
    await next();
    const ms = performance.now() - started;
    metrics.request(ctx.state['operation'] as string | undefined, ctx.status, ms / 1000);
    // Method, path and status only: never bodies or headers (they hold content and tokens).
    // At debug: a synchronous line per request would cost a sixth of the throughput.
    if (log.isLevelEnabled('debug')) log.debug({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(ms) }, 'request');
  });
  app.use(api);
  const docs = docsRouter();
  const router = new Router();
  router.get('/', (ctx) => ctx.redirect('/docs'));
  app.use(docs.routes()).use(router.routes());
  for (const r of routers) app.use(r.routes());
  const server = createServer(app.callback());
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
