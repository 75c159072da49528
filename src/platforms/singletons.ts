import { Gauge, type Registry } from 'prom-client';
import { holdSingleton, type Singleton, type SingletonOptions } from '../infra/db/singleton.js';
import { addStatusPanels } from '../infra/metrics.js';
import { stateOf } from './singleton-state.js';

/** What a platform asks for when it needs a connection held by one process only. */
export type SingletonRequest = Pick<SingletonOptions, 'onAcquired' | 'onLost' | 'watch' | 'up'>;

/**
 * The singletons this process takes part in: taken through the store's leases, shown as
 * `herald_singleton_held{name}` (1 while this process holds it) and on the status page, and listed
 * by `/readyz` as `held` or `standby (held by <holder>)`.
 */
export class Singletons {
  private readonly all = new Map<string, Singleton>();

  constructor(
    private readonly store: Parameters<typeof holdSingleton>[0],
    private readonly holder: string,
    private readonly ttlMs: number,
    private readonly registry: Registry,
    /** HERALD_SINGLETON_DOWN_MS: a holder whose connection (`up`) stays down this long stands down for as long. */
    private readonly downMs: number = 3 * ttlMs,
  ) {
    const all = this.all;
    new Gauge({
      name: 'herald_singleton_held',
      help: 'Whether this process holds a singleton (a connection only one replica may hold, by its lease): 1 or 0, by name',
      labelNames: ['name'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [name, s] of all) this.set({ name }, s.held() ? 1 : 0);
      },
    });
  }

  /**
   * Take part in holding `name`: the callbacks say when this process starts and must stop using it;
   * `up` says whether the connection is up, and a holder whose connection stays down lets it go.
   */
  hold(name: string, request: SingletonRequest): Singleton {
    const existing = this.all.get(name);
    if (existing !== undefined) throw new Error(`singleton ${name} is already held by this process`);
    const s = holdSingleton(this.store, name, { holder: this.holder, ttlMs: this.ttlMs, ...request, ...(request.up !== undefined ? { downMs: this.downMs } : {}) });
    this.all.set(name, s);
    const [section = name] = name.split(':');
    addStatusPanels(this.registry, { section, title: `${name} held here`, metric: 'herald_singleton_held', show: 'up', where: (l) => l['name'] === name });
    return s;
  }

  /** Each singleton by name: `held`, or `standby (held by <holder>)` (`standby` when nobody holds it). */
  states(): Record<string, string> {
    const answer: Record<string, string> = {};
    for (const [name, s] of this.all) answer[name] = stateOf(s);
    return answer;
  }

  async close(): Promise<void> {
    await Promise.all([...this.all.values()].map((s) => s.close()));
  }
}
