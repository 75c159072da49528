import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from './support/client.js';
import { IDS, newRequestId, startTestHerald, type TestHerald } from './support/herald.js';
import { waitFor } from './support/wait.js';

/**
 * A stuck queue is visible: every queue's oldest due job's age is a metric
 * (herald_queue_oldest_due_age_seconds{queue}), and /readyz names a queue whose oldest due job has
 * waited a minute or more (`queues`, additive: the answer is byte for byte as before otherwise).
 * Here no process dispatches (a serving replica whose dispatchers are gone), so what is due waits.
 */
describe('the age of the oldest due job', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startTestHerald({ roles: { http: true, dispatcher: false } });
  });
  afterAll(() => h.close());

  it('is a metric for every queue, and /readyz names a queue that stopped moving (its status unchanged)', async () => {
    const before = await call(h.url, 'GET', '/readyz');
    // Nothing waits: no `queues`, the answer as it always was.
    expect(Object.keys(before.json as object)).toEqual(['status', 'checks', 'singletons']);
    const id = newRequestId();
    expect((await h.bridge.post('/mcp/deliveries', { request_id: id, kind: 'post', target: { guild_id: IDS.guild, destination: 'alerts' }, body: { content: 'waits' } })).status).toBe(202);
    await sql`update deliveries set next_attempt_at = now() - interval '5 minutes' where request_id = ${id}`.execute(h.herald.store.db);
    const ready = await waitFor(async () => {
      const r = await call(h.url, 'GET', '/readyz');
      return (r.json as { queues?: unknown }).queues !== undefined ? r : undefined;
    }, '/readyz to name the deliveries queue');
    expect(ready.status).toBe(200);
    const body = ready.json as { status: string; queues: Record<string, { oldest_due_age_seconds: number }> };
    expect(body.status).toBe('ok');
    expect(Object.keys(body.queues)).toEqual(['deliveries']);
    expect(body.queues['deliveries']?.oldest_due_age_seconds).toBeGreaterThanOrEqual(300);
    const metric = await h.herald.registry.getSingleMetricAsString('herald_queue_oldest_due_age_seconds');
    // Every declared queue has its series; the stuck one reads its age.
    expect(metric).toMatch(/herald_queue_oldest_due_age_seconds\{queue="deliveries"\} (3\d\d)/);
    expect(metric.match(/\{queue="/g)?.length).toBeGreaterThanOrEqual(2);
  });
});
