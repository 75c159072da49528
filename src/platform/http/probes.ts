import type { OperationHandlers } from './api.js';
import { reply } from './reply.js';

/** Each readiness check by name: `ok`, or what is wrong. */
export type Readiness = () => Promise<Record<string, string>>;

/**
 * `/healthz` (the process answers) and `/readyz` (everything it depends on answers). A check that
 * reads `standby ...` (a connection another replica holds) counts as ready; `singletons` lists the
 * connections only one replica holds: `held` here, or `standby (held by <holder>)`.
 */
export function probeOperations(readiness: Readiness, singletons: () => Record<string, string> = () => ({})): OperationHandlers {
  return () => ({
    getHealth: () => reply('getHealth', 200, { status: 'ok' }),
    getReadiness: async () => {
      const checks = await readiness();
      const ok = Object.values(checks).every((v) => v === 'ok' || v.startsWith('standby'));
      const held = singletons();
      const body = Object.keys(held).length > 0 ? { checks, singletons: held } : { checks };
      return ok ? reply('getReadiness', 200, { status: 'ok', ...body }) : reply('getReadiness', 503, { status: 'unavailable', ...body });
    },
  });
}
