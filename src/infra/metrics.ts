import { collectDefaultMetrics, Counter, Registry } from 'prom-client';

export { Registry } from 'prom-client';

/**
 * The one registry of a Herald process, built once by the wiring (app.ts) and handed to each module,
 * which defines its own metrics on it. Never prom-client's global default registry: several Heralds
 * (tests, one process per role) must not share counters. Labels are fixed, low-cardinality words
 * (kind, outcome, status), never ids, tokens or content.
 */
export function createRegistry(): Registry {
  const registry = new Registry();
  // Process metrics: CPU, memory, event-loop lag, handles, GC.
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** Buckets (seconds) of latencies from a few milliseconds to minutes (retries, reconciliation). */
export const LATENCY_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export interface ScrapeReadOptions {
  /** A reading younger than this is reused: scrapes cost at most one read per period. */
  maxAgeMs: number;
  /** A read slower than this is given up for this scrape (the read itself bounds its own work). */
  timeoutMs: number;
}

/**
 * A value read at scrape time from somewhere slow (the database): one read at a time, reused for
 * `maxAgeMs`, and a scrape waits for it at most `timeoutMs`. A scrape never queues reads behind
 * each other, so it cannot pile work onto the store that request handling needs.
 */
export class ScrapeRead<T> {
  private last: { at: number; value: T } | undefined;
  private pending: Promise<T> | undefined;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly options: ScrapeReadOptions,
    private readonly now: () => number = Date.now,
  ) {}

  /** The latest reading, or undefined when the read failed or took too long. */
  async get(): Promise<T | undefined> {
    const last = this.last;
    if (last !== undefined && this.now() - last.at < this.options.maxAgeMs) return last.value;
    this.pending ??= this.read()
      .then((value) => {
        this.last = { at: this.now(), value };
        return value;
      })
      .finally(() => (this.pending = undefined));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), this.options.timeoutMs)));
    try {
      return await Promise.race([this.pending.catch(() => undefined), late]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The labels of one series, as the registry reports them. */
export type SeriesLabels = Readonly<Partial<Record<string, string | number>>>;

/**
 * One figure of the operator's status page: a metric of the registry, sampled every few seconds
 * and drawn as a sparkline. Whoever defines a metric declares its figure beside it, so the page
 * itself names no module and no platform.
 */
export interface StatusPanel {
  /** The heading it appears under: the module or platform it belongs to. */
  section: string;
  title: string;
  /** A metric family of the registry. */
  metric: string;
  /**
   * `sum` or `max` of the matching series now; `perMinute`: how fast their sum grew between two
   * samples (a counter, or a gauge of things found); `p95`: a histogram's 95th percentile (an upper
   * bucket bound) over what it observed between two samples; `up`: 1 while every matching series
   * is 1, shown as up or down.
   */
  show: 'sum' | 'max' | 'perMinute' | 'p95' | 'up';
  /** Which series count; all of them when absent. */
  where?: (labels: SeriesLabels) => boolean;
  /** Shown after each number (` s`, `/min`); `bytes` formats the number as kB, MB, GB. */
  unit?: string;
}

const panelsOf = new WeakMap<Registry, StatusPanel[]>();

/** Add figures to the status page of this registry's process (one with the same section and title is replaced). */
export function addStatusPanels(registry: Registry, ...panels: StatusPanel[]): void {
  const list = panelsOf.get(registry) ?? [];
  for (const p of panels) {
    const i = list.findIndex((q) => q.section === p.section && q.title === p.title);
    if (i === -1) list.push(p);
    else list[i] = p;
  }
  panelsOf.set(registry, list);
}

/** The status page's figures, in the order they were added. */
export function statusPanels(registry: Registry): readonly StatusPanel[] {
  return panelsOf.get(registry) ?? [];
}

/** The counter of failed periodic work (a prune, a sweep), by what it is: one per registry, shared by whoever runs such work. */
export function periodicFailures(registry: Registry): (what: string, times?: number) => void {
  const name = 'herald_periodic_work_failures_total';
  const counter =
    (registry.getSingleMetric(name) as Counter<'what'> | undefined) ??
    new Counter({ name, help: 'Runs of periodic work (hourly prunes of each queue and module, sweeps) that failed, by what it is: a failing prune keeps what it should remove, so this alerts', labelNames: ['what'], registers: [registry] });
  return (what, times = 1) => counter.inc({ what }, times);
}
