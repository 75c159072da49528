import type { OperationHandlers } from './api.js';
import { reply } from './reply.js';

/** Each readiness check by name: `ok`, or what is wrong. */
export type Readiness = () => Promise<Record<string, string>>;

/** `/healthz` (the process answers) and `/readyz` (everything it depends on answers). */
export function probeOperations(readiness: Readiness): OperationHandlers {
  return () => ({
    getHealth: () => reply('getHealth', 200, { status: 'ok' }),
    getReadiness: async () => {
      const checks = await readiness();
      const ok = Object.values(checks).every((v) => v === 'ok');
      return ok ? reply('getReadiness', 200, { status: 'ok', checks }) : reply('getReadiness', 503, { status: 'unavailable', checks });
    },
  });
}
