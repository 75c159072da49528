import type { Operation, OpenAPIRouter, Request as ApiRequest } from 'openapi-backend';

/**
 * openapi-backend's routing, done once per request. Its router rebuilds the operation list (and a
 * RegExp per path template) on every match, and `handleRequest` matches again after Herald's own
 * middleware did: this wraps the router (after `init()`, when the contract no longer changes) so the
 * list and the patterns are built once, and a request object already matched is not matched again.
 * The rules are upstream's: an exact path first, then templates, most specific first; no path is
 * 404, a path without the method is 405.
 */
export interface Routing {
  /** The request's operation, if the contract has one for its path and method. */
  operation(req: ApiRequest): Operation | undefined;
  /** Whether the contract has the request's path (under some method). */
  knowsPath(req: ApiRequest): boolean;
}

export function routeOnce(router: OpenAPIRouter): Routing {
  const operations = router.getOperations();
  router.getOperations = () => operations;
  const templates = operations
    .map((op) => ({ op, pattern: templatePattern(op.path), specificity: op.path.replace(/\{.*?\}/g, '').length }))
    .sort((a, b) => b.specificity - a.specificity);
  // By method and path, the first of the list for each (as a search of the list in order finds it).
  const exactly = new Map<string, Operation>();
  for (const op of operations) if (!exactly.has(`${op.method} ${op.path}`)) exactly.set(`${op.method} ${op.path}`, op);
  const matched = new WeakMap<object, { op: Operation } | { miss: '404' | '405' }>();

  const route = (req: ApiRequest): { op: Operation } | { miss: '404' | '405' } => {
    const seen = matched.get(req);
    if (seen !== undefined) return seen;
    let path = req.path.trim();
    if (!path.startsWith('/')) path = `/${path}`;
    path = path.split('?')[0] ?? path;
    const method = req.method.trim().toLowerCase();
    const exact = exactly.get(`${method} ${path}`);
    let result: { op: Operation } | { miss: '404' | '405' };
    if (exact !== undefined) {
      result = { op: exact };
    } else {
      // The first template (most specific first) with this method; none, but the path matched: 405.
      let known = false;
      let op: Operation | undefined;
      for (const t of templates) {
        if (!t.pattern.test(path)) continue;
        known = true;
        if (t.op.method === method) {
          op = t.op;
          break;
        }
      }
      result = op !== undefined ? { op } : { miss: known ? '405' : '404' };
    }
    matched.set(req, result);
    return result;
  };

  router.matchOperation = ((req: ApiRequest, strict?: boolean) => {
    const result = route(req);
    if ('op' in result) return result.op;
    if (strict !== true) return undefined;
    throw new Error(result.miss === '404' ? '404-notFound: no route matches request' : '405-methodNotAllowed: this method is not registered for the route');
  }) as OpenAPIRouter['matchOperation'];
  return {
    operation: (req) => {
      const result = route(req);
      return 'op' in result ? result.op : undefined;
    },
    knowsPath: (req) => {
      const result = route(req);
      return 'op' in result || result.miss === '405';
    },
  };
}

function templatePattern(path: string): RegExp {
  const literal = path.split(/\{[^}]+\}/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${literal.join('[^/]+')}$`);
}
