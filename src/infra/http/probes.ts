import type { OperationHandlers } from './api.js';
import { reply } from './reply.js';

/** Each queue's oldest due job's age in seconds, read from the store (undefined: it did not answer in time). */
export type QueueAges = () => Promise<Readonly<Record<string, number>> | undefined>;

/**
 * A queue whose oldest due job has waited this long is named in /readyz (`queues`): jobs are due
 * the moment they are accepted and normally claimed within a poll, so a minute means it stopped
 * moving. It does not make the process unready (every replica shares the queue: all of them would
 * leave the load balancer); the alert rules page on it (ops/prometheus/alerts.yml).
 */
export const LATE_QUEUE_SECONDS = 60;

/** Each readiness check by name: `ok`, or what is wrong. */
export type Readiness = () => Promise<Record<string, string>>;

/**
 * `/healthz` (the process answers) and `/readyz` (everything it depends on answers). A check that
 * reads `standby ...` (a connection another replica holds) counts as ready; `singletons` lists the
 * connections only one replica holds: `held` here, or `standby (held by <holder>)`; `queues` names
 * each queue whose oldest due job has waited LATE_QUEUE_SECONDS or more, with its age.
 */
export function probeOperations(readiness: Readiness, singletons: () => Record<string, string> = () => ({}), queueAges: QueueAges = async () => undefined, identities: () => Record<string, Record<string, string>> = () => ({})): OperationHandlers {
  return () => ({
    getHealth: () => reply('getHealth', 200, { status: 'ok' }),
    getReadiness: async () => {
      const [checks, ages] = await Promise.all([readiness(), queueAges()]);
      const ok = Object.values(checks).every((v) => v === 'ok' || v.startsWith('standby'));
      const held = singletons();
      const late = Object.entries(ages ?? {}).filter(([, age]) => age >= LATE_QUEUE_SECONDS);
      // Other identities' checks are said, and leave the status to this replica's own.
      const others = identities();
      const body = {
        checks,
        ...(Object.keys(others).length > 0 ? { identities: others } : {}),
        ...(Object.keys(held).length > 0 ? { singletons: held } : {}),
        ...(late.length > 0 ? { queues: Object.fromEntries(late.map(([queue, age]) => [queue, { oldest_due_age_seconds: Math.floor(age) }])) } : {}),
      };
      return ok ? reply('getReadiness', 200, { status: 'ok', ...body }) : reply('getReadiness', 503, { status: 'unavailable', ...body });
    },
  });
}
