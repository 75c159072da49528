import { sql, type Migration } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from '../config-types.js';
import { registerOutboxHealth, registerQueueAges, WorkerMetrics, type QueueAges } from '../outbox/outbox.metrics.js';
import { OutboxWorker, type Job, type JobQueue } from '../outbox/worker.js';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../infra/db/database.js';
import { periodicFailures, type Registry } from '../infra/metrics.js';
import { Doorbell } from '../infra/db/doorbell.js';
import { errorSummary } from '../infra/errors.js';
import { StartupError } from '../infra/startup.js';
import type { Command, HeraldModule, JobsDeclaration, ModuleParts, ModuleServices, PruneTask } from './contract.js';

// Runs what the modules declare (src/modules/contract.ts): their start in order, their jobs, their
// upkeep and their readiness checks. The wiring (src/app.ts) calls these once per process.

/** How often queues and modules prune what is past its retention. */
export const PRUNE_EVERY_MS = 60 * 60 * 1000;
/** The NOTIFY channel that wakes job runners in other processes (its name predates the other queues). */
export const WAKE_CHANNEL = 'herald_deliveries';

/** The modules, started. */
export interface StartedModules {
  readonly parts: readonly ModuleParts<unknown>[];
  use<G>(module: HeraldModule<G>): G;
  /** Undo every start, the last one first. */
  close(): Promise<void>;
}

/** The doorbell of one store: on PostgreSQL a ring also NOTIFYs the other processes (PGlite has none). */
export function doorbellOf<DB>(store: Store<DB>): Doorbell {
  const db = store.db;
  return new Doorbell(store.kind === 'postgres' ? async () => void (await sql`select pg_notify(${WAKE_CHANNEL}, '')`.execute(db)) : async () => undefined);
}

/** Each module's metrics, defined in the modules' order (before the platforms start theirs). */
export async function defineMetrics(modules: readonly HeraldModule[], registry: Registry): Promise<unknown[]> {
  const made: unknown[] = [];
  for (const m of modules) made.push(await m.metrics?.(registry));
  return made;
}

/** The migrations the modules declare in their folders, by name: one name declared twice stops start-up. */
export function declaredMigrations(parts: readonly { readonly name: string; readonly migrations?: Readonly<Record<string, Migration>> }[]): Record<string, Migration> {
  const all: Record<string, Migration> = {};
  const owner = new Map<string, string>();
  for (const part of parts) {
    for (const [name, migration] of Object.entries(part.migrations ?? {})) {
      const other = owner.get(name);
      if (other !== undefined) throw new StartupError(`the migration ${name} is declared by both ${other} and ${part.name}: rename one`);
      owner.set(name, part.name);
      all[name] = migration;
    }
  }
  return all;
}

/**
 * What each module declares it needs, checked before any starts: the modules it `use`s listed
 * above it, and each port it asks for answered by a module of the list. Every gap is said at once.
 */
export function checkNeeds(modules: readonly HeraldModule[]): void {
  const problems: string[] = [];
  const answered = new Set(modules.flatMap((m) => m.answers ?? []));
  for (const [i, m] of modules.entries()) {
    for (const needed of m.needs?.modules ?? []) {
      const at = modules.findIndex((other) => other.name === needed.name);
      if (at < 0) problems.push(`module ${m.name} needs module ${needed.name}, which is not in the module list`);
      else if (at > i) problems.push(`module ${m.name} needs module ${needed.name}, which is listed after it (list it above)`);
    }
    for (const port of m.needs?.ports ?? []) {
      if (!answered.has(port)) problems.push(`module ${m.name} needs a module answering ${port}, and none in the module list does`);
    }
  }
  if (problems.length > 0) throw new StartupError(problems.join('; '));
}

/** Start each module in order, giving it the shared services, its own settings and what the modules above it give. */
export async function startModules(modules: readonly HeraldModule[], metrics: readonly unknown[], base: Omit<ModuleServices, 'use' | 'commands' | 'settings'>): Promise<StartedModules> {
  checkNeeds(modules);
  const gives = new Map<HeraldModule, unknown>();
  const started: ModuleParts<unknown>[] = [];
  const use = <G>(module: HeraldModule<G>): G => {
    if (!gives.has(module as HeraldModule)) throw new Error(`module ${module.name} is used before it started (see the order in src/modules/modules.ts)`);
    return gives.get(module as HeraldModule) as G;
  };
  // A command runs against what its own module gives, looked up when it runs.
  const declared = await Promise.all(modules.map(async (m) => (await m.commands?.()) ?? []));
  const commands = (): Command<undefined>[] =>
    modules.flatMap((m, i) => (declared[i] ?? []).map((c): Command<undefined> => ({ ...c, execute: (invocation) => c.execute(invocation, use(m)) })));
  const services = { ...base, use, commands };
  const settingsOf = (m: HeraldModule): unknown => {
    if (m.config === undefined) return undefined;
    if (!(m.name in base.config.modules)) throw new StartupError(`module ${m.name}'s settings were not read: loadConfig must be given the same module list`);
    return base.config.modules[m.name];
  };
  const close = async (): Promise<void> => {
    for (const parts of started.splice(0).reverse()) {
      await parts.close?.().catch((err: unknown) => base.log.error({ err: errorSummary(err) }, 'a module failed to stop'));
    }
  };
  try {
    for (const [i, module] of modules.entries()) {
      const parts = await module.start({ ...services, settings: settingsOf(module) }, metrics[i]);
      started.push(parts);
      gives.set(module, parts.gives);
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { parts: started, use, close };
}

/**
 * Every role reports the queues it shares (one database): dashboards take the max across processes.
 * Every declared queue's oldest due job is read (herald_queue_oldest_due_age_seconds); the answer
 * reads it for /readyz.
 */
export function reportQueues(declared: readonly JobsDeclaration[], registry: Registry, clock: Clock): QueueAges {
  for (const d of declared) {
    if (d.report === true && d.queue.depth !== undefined) registerOutboxHealth(registry, d.queue.depth, clock, { kinds: d.kinds.map((k) => k.kind) });
  }
  return registerQueueAges(registry, [...new Set(declared.map((d) => d.queue))], clock);
}

/** Every queue's jobs, run in this process. */
export interface JobRunner {
  readonly running: boolean;
  /** Look for due work now. */
  wake(): void;
  /** Run every queue's upkeep now; how many rows it removed. */
  prune(): Promise<number>;
  /** Stop claiming; let in-flight jobs finish within the grace period, then release the rest. */
  stop(): Promise<void>;
}

/**
 * Run the declared jobs: one worker loop over every declared queue's kinds, sharing one pool (a
 * kind's own concurrency caps it within the pool), woken by the doorbell and, where a queue asks for
 * it, by other processes' NOTIFY. A queue is pruned by the worker only where its declaration says so.
 */
export async function runJobs<DB>(
  declared: readonly JobsDeclaration[],
  services: { config: Config; store: Store<DB>; clock: Clock; log: Logger; doorbell: Doorbell; registry: Registry },
): Promise<JobRunner> {
  const { config, store, clock, log, doorbell, registry } = services;
  const worker = new OutboxWorker<Job>(undefined, clock, log, {
    leaseMs: config.leaseMs,
    pollMs: config.pollMs,
    concurrency: config.dispatchConcurrency,
    shutdownGraceMs: config.shutdownGraceMs,
    pruneEveryMs: PRUNE_EVERY_MS,
    metrics: new WorkerMetrics(registry),
  });
  for (const d of declared) {
    const queue: JobQueue<Job> = d.prune === true ? d.queue : withoutPrune(d.queue);
    for (const kind of d.kinds) worker.register(d.concurrency !== undefined && kind.concurrency === undefined ? { ...kind, concurrency: d.concurrency } : kind, queue);
  }
  const unring = doorbell.onRing(() => worker.wake());
  // LISTEN heals itself after a lost connection; polling covers any gap.
  const unlisten = declared.some((d) => d.listen === true) ? await store.listen(WAKE_CHANNEL, () => worker.wake()) : undefined;
  worker.start();
  return {
    get running() {
      return worker.running;
    },
    wake: () => worker.wake(),
    prune: () => worker.prune(),
    async stop() {
      unring();
      await unlisten?.();
      await worker.stop();
    },
  };
}

/** The queue with its methods bound, less its upkeep (a queue whose declaration does not ask to be pruned). */
function withoutPrune<J extends Job>(q: JobQueue<J>): JobQueue<J> {
  const depth = q.depth?.bind(q);
  return { name: q.name, claim: q.claim.bind(q), release: q.release.bind(q), quarantine: q.quarantine.bind(q), oldestDue: q.oldestDue.bind(q), ...(depth !== undefined ? { depth } : {}) };
}

/**
 * Run every module's upkeep hourly. A failure is logged as an error and counted by what failed
 * (herald_periodic_work_failures_total, alerted on: a prune that fails keeps what it should
 * remove, hour after hour); the next hour tries again. Returns the stop.
 */
export function schedulePrune(tasks: readonly PruneTask[], clock: Clock, log: Logger, registry?: Registry): () => void {
  const failed = registry !== undefined ? periodicFailures(registry) : undefined;
  // Each task's series exists (at 0) before it first fails: an increase() sees the first failure.
  for (const task of tasks) failed?.(task.what, 0);
  const timer = setInterval(() => {
    for (const task of tasks) {
      task.run(clock.now()).catch((err: unknown) => {
        failed?.(task.what);
        log.error({ err: errorSummary(err), what: task.what }, `could not prune ${task.what}`);
      });
    }
  }, PRUNE_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** `/readyz`: the database, the job runner (and its LISTEN session), then every named check of the platforms and the modules. */
export function readinessOf<DB>(
  store: Store<DB>,
  worker: JobRunner | undefined,
  checks: readonly ((() => Record<string, string>) | Readonly<Record<string, () => string>>)[],
): () => Promise<Record<string, string>> {
  return async () => {
    const answer: Record<string, string> = {};
    try {
      await sql`select 1`.execute(store.db);
      answer['database'] = 'ok';
    } catch {
      answer['database'] = 'unavailable';
    }
    if (worker !== undefined) {
      answer['dispatcher'] = worker.running ? 'ok' : 'stopped';
      // While the LISTEN session reconnects, work from other processes waits for polling.
      answer['listen'] = store.listening() ? 'ok' : 'unavailable';
    }
    for (const check of checks) {
      if (typeof check === 'function') Object.assign(answer, check());
      else for (const [name, named] of Object.entries(check)) answer[name] = named();
    }
    return answer;
  };
}
