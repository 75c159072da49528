import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs, QueryResult, RootOperationNode, UnknownRow } from 'kysely';
import type { Delivery } from '../../src/modules/deliveries/delivery.js';
import { DeliveryService } from '../../src/modules/deliveries/delivery.service.js';
import { newRequestId } from '../support/herald.js';
import { GUILD, startServices, type Services } from '../support/services.js';
import { tablesOf } from '../../src/infra/db/tables.js';
import type { DeliveriesDb } from '../../src/modules/deliveries/delivery.table.js';

/** Records the kind of every statement Kysely runs (each executed once; a subquery built apart is not a statement). */
class StatementLog implements KyselyPlugin {
  readonly kinds: string[] = [];
  private readonly built = new WeakMap<object, string>();
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    const node = args.node as RootOperationNode & { endModifiers?: readonly { modifier?: string }[]; with?: { expressions: readonly { expression: { kind: string } }[] } };
    const forUpdate = node.kind === 'SelectQueryNode' && (node.endModifiers ?? []).some((m) => m.modifier === 'ForUpdate');
    // A statement whose WITH inserts (and whose SELECT reads what it could not insert) is an insert.
    const inserts = (node.with?.expressions ?? []).some((e) => e.expression.kind === 'InsertQueryNode');
    this.built.set(args.queryId, forUpdate ? 'SelectForUpdate' : inserts ? 'Insert' : node.kind.replace('QueryNode', ''));
    return args.node;
  }
  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    this.kinds.push(this.built.get(args.queryId) ?? 'unknown');
    return args.result;
  }
}

/** Loses the session of the next `count` statements, before they run or after they committed, as a failover does. */
class LostSessions implements KyselyPlugin {
  count = 0;
  constructor(private readonly when: 'before' | 'after') {}
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    if (this.when === 'before' && this.count > 0) {
      this.count -= 1;
      throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
    }
    return args.node;
  }
  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    if (this.when === 'after' && this.count > 0) {
      this.count -= 1;
      throw new Error('Connection terminated unexpectedly');
    }
    return args.result;
  }
}

const post = (content: string): Delivery => ({ request_id: newRequestId(), kind: 'post', target: { guild_id: GUILD, destination: 'alerts' }, body: { content } });

/** The accept path: one statement for a new delivery and for a repeat (its unlocked read), group commit. */
describe('accept (service level)', () => {
  let s: Services;
  let log: StatementLog;
  let service: DeliveryService;
  let rang = 0;
  beforeAll(async () => {
    s = await startServices();
    // Accept only: no dispatcher may settle (and so change) what these tests store.
    await s.worker.stop();
    log = new StatementLog();
    service = new DeliveryService(tablesOf<DeliveriesDb>(s.store.db.withPlugin(log)), { now: () => new Date() }, { post: true, dm: true, edit: true }, { announce: () => (rang += 1) });
  });
  afterAll(() => s.close());

  it('stores a new delivery with one INSERT and answers what a read of it would', async () => {
    const d = post('one statement');
    log.kinds.length = 0;
    rang = 0;
    const accepted = await service.accept(d);
    expect(log.kinds).toEqual(['Insert']);
    expect(rang).toBe(1);
    expect(accepted.existing).toBe(false);
    // Byte for byte what the stored row reads back as.
    expect(JSON.stringify(accepted.state)).toBe(JSON.stringify(await service.get(d.request_id)));
  });

  it('answers a repeat with the one statement, whose unlocked read returns the stored row, with no row lock', async () => {
    const d = post('repeat');
    const first = await service.accept(d);
    log.kinds.length = 0;
    const again = await service.accept(d);
    expect(again.existing).toBe(true);
    expect(log.kinds).toEqual(['Insert']);
    // The stored row, as a read of it answers.
    expect(JSON.stringify(again.state)).toBe(JSON.stringify(first.state));
    expect(JSON.stringify(again.state)).toBe(JSON.stringify(await service.get(d.request_id)));
  });

  it('takes the row lock only to reset a failed delivery, and rings for it', async () => {
    const d = post('reset me');
    await service.accept(d);
    await s.store.db.updateTable('deliveries').set({ status: 'failed', failure_code: 'UPSTREAM_UNAVAILABLE' }).where('request_id', '=', d.request_id).execute();
    log.kinds.length = 0;
    rang = 0;
    const again = await service.accept(d);
    expect(again.state.state).toBe('pending');
    expect(log.kinds).toEqual(['Insert', 'SelectForUpdate', 'Update']);
    expect(rang).toBe(1);
  });

  it('refuses a reused request_id with a different payload, from the unlocked read', async () => {
    const d = post('original');
    await service.accept(d);
    await expect(service.accept({ ...d, body: { content: 'different' } })).rejects.toThrow('request_id was already used for a different request');
  });

  it('commits concurrent accepts together, and the same request_id twice in one batch once', async () => {
    const batch = Array.from({ length: 40 }, (_, i) => post(`batch ${i}`));
    const twin = batch[0] as Delivery;
    log.kinds.length = 0;
    const results = await Promise.all([...batch, twin].map((d) => service.accept(d)));
    const inserts = log.kinds.filter((k) => k === 'Insert').length;
    expect(inserts).toBeLessThan(batch.length);
    expect(results.filter((r) => !r.existing)).toHaveLength(batch.length);
    expect(results.at(-1)?.existing).toBe(true);
    const stored = await s.store.db.selectFrom('deliveries').select((eb) => eb.fn.countAll<string>().as('n')).where('request_id', 'in', batch.map((d) => d.request_id)).executeTakeFirstOrThrow();
    expect(Number(stored.n)).toBe(batch.length);
  });
  it('answers a burst of repeats of one stored request_id together: the statement that reads it answers each', async () => {
    const d = post('retried at once');
    const first = await service.accept(d);
    log.kinds.length = 0;
    const repeats = await Promise.all(Array.from({ length: 32 }, () => service.accept(d)));
    expect(repeats.every((r) => r.existing && JSON.stringify(r.state) === JSON.stringify(first.state))).toBe(true);
    // Group commit gathers the burst into a few statements (at most one a slot): a twin in a batch is
    // answered by the row read for the first, not sent round again (which took one statement a repeat).
    expect(log.kinds.every((k) => k === 'Insert')).toBe(true);
    expect(log.kinds.length).toBeLessThanOrEqual(8);
  });

  it('reads a burst of GETs together: one statement answers many, each as a read alone does', async () => {
    const posts = Array.from({ length: 8 }, (_, i) => post(`read ${i}`));
    await Promise.all(posts.map((d) => service.accept(d)));
    const ids = posts.map((d) => d.request_id);
    const alone: string[] = [];
    for (const id of ids) alone.push(JSON.stringify(await service.get(id)));
    log.kinds.length = 0;
    const asked = Array.from({ length: 32 }, (_, i) => ids[i % 8] ?? '');
    const together = await Promise.all(asked.map(async (id) => JSON.stringify(await service.get(id))));
    expect(together).toEqual(asked.map((_, i) => alone[i % 8]));
    // At most one statement a slot in flight, then the rest gathered: far fewer than one a read.
    expect(log.kinds.every((k) => k === 'Select')).toBe(true);
    expect(log.kinds.length).toBeLessThanOrEqual(8);
    await expect(service.get(newRequestId())).rejects.toThrow('unknown request_id');
  });

  it('sends the statement again when its session was lost, before it ran or after it committed: one row, a new delivery', async () => {
    for (const when of ['before', 'after'] as const) {
      const lost = new LostSessions(when);
      const db = tablesOf<DeliveriesDb>(s.store.db.withPlugin(lost));
      const flaky = new DeliveryService(db, { now: () => new Date() }, { post: true, dm: true, edit: true });
      const d = post(`session lost ${when}`);
      lost.count = 1;
      const accepted = await flaky.accept(d);
      expect(accepted.existing, when).toBe(false);
      expect(lost.count).toBe(0);
      expect((await db.selectFrom('deliveries').select('request_id').where('request_id', '=', d.request_id).execute()).length).toBe(1);
      // A store that stays unreachable is still an error (the API answers 503).
      lost.count = 10;
      await expect(flaky.accept(post(`still lost ${when}`))).rejects.toThrow();
    }
  });
});
