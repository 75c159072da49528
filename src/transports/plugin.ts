import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Clock } from '../platform/clock.js';
import type { Store } from '../platform/db/database.js';
import type { EnvReader } from '../platform/env.js';
import type { Registry } from '../platform/metrics.js';
import type { Singleton } from '../platform/db/singleton.js';
import type { SingletonRequest } from './singletons.js';
import type { CommandHandler, NonceLedger, Transport } from './transport.js';
import type { RESTPostAPIChatInputApplicationCommandsJSONBody } from 'discord.js';

// What a platform folder (src/transports/<name>/index.ts) exports, and what it is given. The one
// list of platforms is src/transports/registry.ts; the wiring (src/app.ts) starts the configured ones.

/** The settings every platform may read besides its own. */
export interface CoreSettings {
  /** HERALD_LEASE_MS: a platform request must end well inside a job's lease. */
  readonly leaseMs: number;
  /** HERALD_TRANSPORT: the platform people's identities live on (DMs go there). */
  readonly home: string;
}

/** What a started platform is given. */
export interface TransportServices {
  /** Which store holds Herald's tables (`db`): a budget shared between processes needs PostgreSQL. */
  readonly store: Pick<Store, 'kind'>;
  readonly db: Kysely<unknown>;
  readonly clock: Clock;
  readonly log: Logger;
  readonly registry: Registry;
  /** Whether this process serves HTTP (and so the platform's command surface, if it has one). */
  readonly serving: boolean;
  /**
   * Whether this process runs jobs (the dispatcher role). A connection that sends (IRC's) is held
   * only where jobs run: a process that cannot send never takes its lease, only watches who holds it.
   */
  readonly dispatching: boolean;
  /** Where the platform reports which message a send key created, for reconciliation after a lost answer. */
  ownMessage(key: string, channelId: string, messageId: string, at: Date): Promise<void>;
  /** What those reports say: which message a key created, and which key created a message. */
  readonly ledger: NonceLedger;
  /**
   * Report a link this process holds (a connection), shown in metrics and on the status page;
   * `up` says undefined while another replica holds it (this one is on standby).
   */
  link(name: string, up: () => boolean | undefined): void;
  /**
   * Hold a connection only one process may hold (`discord:gateway`, `irc:observer`), under a lease
   * in the store: onAcquired when this process takes it, onLost when it must stop using it at once.
   * Another process takes it over within seconds after the holder dies. Close it on close.
   */
  singleton(name: string, request: SingletonRequest): Singleton;
}

/** A platform's slash commands: what to register, and who answers an invocation. */
export interface CommandSurface {
  readonly definitions: readonly RESTPostAPIChatInputApplicationCommandsJSONBody[];
  readonly run: CommandHandler;
}

/** What the modules offer a platform's own surfaces once they are all up. */
export interface Surfaces {
  readonly commands: CommandSurface;
}

/** A platform this process speaks, started. */
export interface RunningTransport {
  /** What the platform can do, as facets (src/transports/transport.ts). */
  readonly facets: Transport;
  /** Named checks of `/readyz`: 'ok' or what is wrong. */
  readiness(): Record<string, string>;
  /** Connect the platform's own surfaces (a gateway with slash commands), once the modules are up. */
  serve?(surfaces: Partial<Surfaces>): Promise<void>;
  close(): Promise<void>;
}

/** A platform, as its folder's `index.ts` exports it. `C` is its own settings. */
export interface TransportPlugin<C = unknown> {
  readonly name: string;
  /** Why the platform is off when its settings are absent, e.g. `HERALD_IRC_URL is unset`. */
  readonly off: string;
  /**
   * Read and check this platform's variables (problems go to `env`); undefined when the platform
   * is not configured in this environment.
   */
  config(env: EnvReader, core: CoreSettings): C | undefined;
  /** Checks that must pass before the store opens (a token the platform rejects stops start-up). */
  check?(config: C, log: Logger): Promise<void>;
  start(config: C, services: TransportServices): Promise<RunningTransport>;
  /**
   * A local double of the platform for sandbox mode (no DISCORD_TOKEN): started, when this
   * platform's own settings are absent, before Herald starts, and given to it as its settings.
   */
  sandbox?(options: SandboxOptions): Promise<PlatformSandbox<C>>;
}

/** Where a platform's sandbox keeps its state and listens. */
export interface SandboxOptions {
  /** HERALD_DATA_DIR: the sandbox keeps its world here across restarts. */
  readonly dataDir: string;
  readonly host: string;
  /** The port it serves on (0: any free one). */
  readonly port: number;
  readonly core: CoreSettings;
}

/** A platform's sandbox, started. */
export interface PlatformSandbox<C> {
  /** The page where a person sees the sandbox's world. */
  readonly url: string;
  /** The platform's settings pointing at the sandbox. */
  readonly config: C;
  /** Banner lines that say what is in it (channels to map, people to pair as). */
  readonly notes?: readonly string[];
  close(): Promise<void>;
}

/** A platform definition, typed where it is written. */
export function defineTransport<C>(plugin: TransportPlugin<C>): TransportPlugin<C> {
  return plugin;
}
