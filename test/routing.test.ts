import { OpenAPIBackend, type Document } from 'openapi-backend';
import { describe, expect, it } from 'vitest';
import { specDocument } from '../src/infra/contract/spec.js';
import { routeOnce } from '../src/infra/http/routing.js';

async function backend(): Promise<OpenAPIBackend> {
  const api = new OpenAPIBackend({ definition: specDocument() as unknown as Document, quick: true, strict: true, ignoreTrailingSlashes: false });
  await api.init();
  return api;
}

function outcome(f: () => { operationId?: string } | undefined): string {
  try {
    return f()?.operationId ?? 'none';
  } catch (err) {
    return (err as Error).message;
  }
}

/** Routing once per request (routing.ts) answers exactly what openapi-backend's own router does. */
describe('routeOnce', () => {
  it('matches every contract path, method and near miss as upstream does, strict and not', async () => {
    const upstream = await backend();
    const wrapped = await backend();
    const routing = routeOnce(wrapped.router);
    const paths = new Set<string>(['/', '/nope', '/mcp/', '/mcp/deliveries/', '/mcp/deliveries/a/b', '/admin', '/healthz/', '//healthz']);
    for (const op of upstream.getOperations()) {
      paths.add(op.path.replace(/\{[^}]+\}/g, 'x1'));
      paths.add(op.path.replace(/\{[^}]+\}/g, '123456789012345678'));
      paths.add(`${op.path.replace(/\{[^}]+\}/g, 'x1')}?q=1`);
    }
    let compared = 0;
    for (const path of paths) {
      for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD']) {
        for (const strict of [false, true]) {
          const req = { method, path, headers: {} };
          expect(outcome(() => wrapped.router.matchOperation({ ...req }, strict as true)), `${method} ${path} strict=${strict}`).toBe(
            outcome(() => upstream.router.matchOperation({ ...req }, strict as true)),
          );
          compared += 1;
        }
        const req = { method, path, headers: {} };
        expect(routing.operation(req)?.operationId ?? 'none').toBe(outcome(() => upstream.router.matchOperation({ ...req })));
        // The path is the contract's when upstream answers anything but 404 for it.
        expect(routing.knowsPath(req)).toBe(!outcome(() => upstream.router.matchOperation({ ...req }, true)).startsWith('404'));
      }
    }
    expect(compared).toBeGreaterThan(100);
  });

  it('matches a request object once: handleRequest reuses the match', async () => {
    const api = await backend();
    const routing = routeOnce(api.router);
    const req = { method: 'GET', path: '/healthz', headers: {} };
    const op = routing.operation(req);
    expect(op?.operationId).toBeDefined();
    expect(api.router.matchOperation(req, true)).toBe(op);
  });
});
