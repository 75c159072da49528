import type Router from '@koa/router';
import type { Kysely, Migration } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from '../config-types.js';
import type { Job, JobKind, JobQueue } from '../outbox/worker.js';
import type { Clock } from '../infra/clock.js';
import type { EnvReader } from '../infra/env.js';
import type { Store } from '../infra/db/database.js';
import type { Doorbell } from '../infra/db/doorbell.js';
import type { Events } from '../infra/db/events.js';
import type { OperationHandlers } from '../infra/http/api.js';
import type { Policy } from '../infra/policy/policy.js';
import type { McpTool } from '../infra/mcp/tool.js';
import type { Registry } from '../infra/metrics.js';
import type { Surfaces } from '../platforms/plugin.js';
import type { Platforms } from '../platforms/platform.js';
import type { Command } from './command-types.js';

// What a capability of Herald (a module) declares, and what it is given to run. The wiring
// (src/app.ts) starts the modules of src/modules/modules.ts in order and runs what they declare:
// one HTTP API, one job runner, one prune scheduler, one readiness answer.

// Commands are part of the contract: a module that declares commands writes them with these.
export { requiredOption, type Command, type CommandReply } from './command-types.js';

/** What a process does: serve HTTP (and the platform's command surfaces), dispatch jobs, or both. */
export interface Roles {
  readonly http: boolean;
  readonly dispatcher: boolean;
}

/** What every module is given; `S`: its own settings (its `config` hook's answer). */
export interface ModuleServices<S = unknown> {
  readonly config: Config;
  /** This module's own settings, read from the environment by its `config` hook (undefined without one). */
  readonly settings: S;
  readonly store: Store;
  /** Every part's tables: a module narrows it to its own with `tablesOf` (src/infra/db/database.ts). */
  readonly db: Kysely<unknown>;
  readonly clock: Clock;
  readonly log: Logger;
  /** Every metric this process exports: a module defines its own on it. */
  readonly registry: Registry;
  /** The platforms this process speaks (src/platforms/platforms.ts). */
  readonly transports: Platforms;
  /** Ring after committing due work: wakes the job runner here, and other processes' through NOTIFY. */
  readonly doorbell: Doorbell;
  /** Changes other processes' listeners must hear of (ids only): publish after the commit, subscribe to re-read. */
  readonly events: Events;
  readonly roles: Roles;
  /** Where people open what Herald sent, and the private origins media may come from (sandbox mode). */
  readonly site: { readonly messageLinkBase: string | undefined; readonly mediaOrigins: readonly string[] };
  /** The operator's policy (HERALD_POLICY), as loaded and checked at start-up; undefined: no rules. */
  readonly policy?: Policy | undefined;
  /** What an earlier module of the list gives (its `start` answer's `gives`). */
  use<G>(module: HeraldModule<G>): G;
  /** Every module's commands, bound to what their module gives (for the command router). */
  commands(): readonly Command<undefined>[];
}

/** A queue of jobs a module owns, with the kinds that run from it and how many at once. */
export interface JobsDeclaration<J extends Job = Job> {
  readonly queue: JobQueue<J>;
  readonly kinds: readonly JobKind<J>[];
  /** Jobs of each of these kinds one process runs at once, within the worker's shared pool (HERALD_DISPATCH_CONCURRENCY). */
  readonly concurrency?: number;
  /** Prune the queue's finished rows hourly (`queue.prune`). */
  readonly prune?: boolean;
  /**
   * Report this queue's depth from every process (herald_outbox_jobs, herald_outbox_oldest_due_age_seconds).
   * At most one queue reports (the metrics are named once); the worker's own metrics cover every kind.
   */
  readonly report?: boolean;
  /** Wake on another process's NOTIFY (the doorbell's channel) as well as on this one's doorbell. */
  readonly listen?: boolean;
}

/** Periodic upkeep: deletes what is past its retention. `what` names it in the log when it fails. */
export interface PruneTask {
  readonly what: string;
  run(now: Date): Promise<unknown>;
}

/** Routes outside the contract; `close` ends what would hold the server open (event streams) as it stops. */
export interface Routes {
  readonly router: Router;
  close?(): void;
}

/** A page of the HTTP API an operator opens, linked from the status page. */
export interface ApiPage {
  readonly title: string;
  readonly path: string;
}

/** What a started module adds to the running process. Every part is optional. */
export interface ModuleParts<G> {
  /** What other modules may `use` (services, ports). */
  readonly gives: G;
  /** Handlers of the contract's operations (openapi/), by operationId. */
  readonly operations?: readonly OperationHandlers[];
  /** Routes outside the contract (a web UI, an event stream). */
  readonly routes?: readonly Routes[];
  readonly pages?: readonly ApiPage[];
  /** Run only where this process dispatches. */
  readonly jobs?: readonly JobsDeclaration[];
  /** Run hourly where this process serves HTTP. */
  readonly prune?: readonly PruneTask[];
  /** Named checks of `/readyz`: 'ok' or what is wrong. */
  readonly readiness?: Readonly<Record<string, () => string>>;
  /** What the platforms' own surfaces offer (Discord's gateway answers slash commands with it). */
  readonly surfaces?: Partial<Surfaces>;
  /** Undo `start` (after the HTTP API and the jobs stopped). */
  close?(): Promise<void>;
}

/** A module's tables, as a type only (`ownTables<DeliveriesDb>()`): src/schema.ts assembles the Database from them. */
export interface Tables<T> {
  readonly type?: () => T;
}

/** Each module's tables of a module list (a const tuple), together: what the store holds for them. */
export type TablesOf<L extends readonly unknown[]> = Together<{ [K in keyof L]: L[K] extends { readonly tables?: Tables<infer T> } ? (unknown extends T ? Record<never, never> : T) : Record<never, never> }[number]>;

/** A union's members, intersected. */
type Together<U> = (U extends unknown ? (u: U) => void : never) extends (all: infer I) => void ? I : never;

/** The phantom that carries a module's tables' type (nothing at run time). */
export function ownTables<T>(): Tables<T> {
  return {};
}

/** What a module needs beside it, checked before anything starts (src/modules/runner.ts `checkNeeds`). */
export interface ModuleNeeds {
  /** Modules it `use`s: listed before it. */
  readonly modules?: readonly { readonly name: string }[];
  /** Ports it asks others to answer (by name): some module of the list must declare it in its `answers`. */
  readonly ports?: readonly string[];
}

/**
 * One capability of Herald: declared in its folder's `index.ts`, listed in src/modules/modules.ts.
 * Only the declaration (its name, contract, migrations, needs, settings and tools) is loaded with
 * it: `herald mcp` reads the tools of every module, so the rest is imported (`import()`) when it is
 * asked for. `G`: what it gives; `M`: its metrics; `S`: its settings; `T`: its tables.
 */
export interface HeraldModule<G = unknown, M = unknown, S = unknown, T = unknown> {
  readonly name: string;
  /**
   * Its own contract (an OpenAPI 3.1 file in its folder, JSON or YAML): its paths, components and
   * operations (each with `x-herald-policy`), merged into the bundle (generated/openapi.json) when
   * it starts. The modules of src/modules/ keep theirs in openapi/ (the generated types need them).
   */
  readonly contract?: string | URL;
  /** Its migrations, by name (names sort in the order they apply, with migrations/'s). */
  readonly migrations?: Readonly<Record<string, Migration>>;
  /** Its tables' type (`ownTables<...>()`), for src/schema.ts: nothing at run time. */
  readonly tables?: Tables<T>;
  /** What it needs beside it: a missing one stops start-up, naming it. */
  readonly needs?: ModuleNeeds;
  /** The ports (by name) it answers for others' `needs`. */
  readonly answers?: readonly string[];
  /**
   * Its settings, read from the environment like a platform's (src/platforms/plugin.ts): each
   * variable documented with a backquoted-name comment in its folder; a problem is said through
   * `env.problem` and stops start-up with the others. `start` is handed the answer as `settings`.
   */
  config?(env: EnvReader): S;
  /** Its MCP tools (served by `herald mcp`, which starts no module). */
  tools?(): readonly McpTool<never>[];
  /** Its commands (slash commands, `run_command`); they run against what `start` gives. */
  commands?(): Promise<readonly Command<G>[]>;
  /**
   * Its metrics, defined on the registry before any platform starts (the status page shows its
   * sections in the order they were defined); `start` is handed what this returns.
   */
  metrics?(registry: Registry): Promise<M>;
  start(services: ModuleServices<S>, metrics: M): Promise<ModuleParts<G>>;
}

/** A module definition, typed where it is written. */
export function defineModule<G, M = undefined, S = undefined, T = unknown>(module: HeraldModule<G, M, S, T>): HeraldModule<G, M, S, T> {
  return module;
}
