import type Router from '@koa/router';
import type { Kysely, Migration } from 'kysely';
import type { Logger } from 'pino';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../infra/db/database.js';
import type { EnvReader } from '../infra/env.js';
import type { Registry } from '../infra/metrics.js';
import type { Singleton } from '../infra/db/singleton.js';
import type { SingletonRequest } from './singletons.js';
import type { CommandDefinition, CommandHandler, NonceLedger, Platform } from './platform.js';
import { DEFAULT_IDENTITY } from '../infra/policy/identity.js';

// What a platform folder (src/platforms/<name>/index.ts) exports, and what it is given. The one
// list of platforms is src/platforms/platforms.ts; the wiring (src/app.ts) starts the configured ones.

/** The settings every platform may read besides its own. */
export interface CoreSettings {
  /** HERALD_LEASE_MS: a platform request must end well inside a job's lease. */
  readonly leaseMs: number;
  /** HERALD_TRANSPORT: the platform people's identities live on (DMs go there). */
  readonly home: string;
}

/** What PlatformServices.adminGate answers. */
export type AdminGate = { readonly ok: true } | { readonly ok: false; readonly status: 401 | 429 | 503; readonly error: string; readonly retryAfterSeconds?: number };

/** What a started platform is given. */
export interface PlatformServices {
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
  /**
   * Whether a request to one of the platform's own operator pages carries HERALD_ADMIN_TOKEN: `ok`,
   * or the answer to give (401; 429 after too many failures from its address, as the API's
   * `/admin/`; 503 when HERALD_ADMIN_TOKEN is unset).
   */
  adminGate(authorization: string | undefined, address: string): AdminGate;
}

/** A platform's slash commands: what to register (Herald's definitions, which the platform converts), and who answers an invocation. */
export interface CommandSurface {
  readonly definitions: readonly CommandDefinition[];
  readonly run: CommandHandler;
  /**
   * The commands each of a platform's other bots (identities) registers too, where Herald is several
   * bots: `/agent`, since a person registers with each bot that may reach them. The platform gives
   * each invocation the bot's identity. The rest are the default bot's. Absent: none.
   */
  readonly everyBot?: Omit<CommandSurface, 'everyBot'>;
}

/** What the modules offer a platform's own surfaces once they are all up. */
export interface Surfaces {
  readonly commands: CommandSurface;
}

/** A platform this process speaks, started. */
export interface RunningPlatform {
  /** What the platform can do, as facets (src/platforms/platform.ts): as its default identity. */
  readonly facets: Platform;
  /** The same, as each of its other identities (src/infra/policy/identity.ts), by name. */
  readonly identities?: ReadonlyMap<string, Platform>;
  /** Named checks of `/readyz`: 'ok' or what is wrong. */
  readiness(): Record<string, string>;
  /** Each identity's named checks, by identity (the default bot's too where they leave the replica ready): reported by `/readyz`, never its status. */
  identityReadiness?(): Record<string, Record<string, string>>;
  /**
   * Pages of the platform's own for a browser, outside the API's contract (Slack's OAuth install:
   * `/slack/install`, `/slack/oauth_redirect`), served where this process serves HTTP. Never under
   * `/mcp/` or `/admin/` (the API's): each checks its caller (services.isAdmin) and its input itself.
   */
  readonly routes?: readonly Router[];
  /** Connect the platform's own surfaces (a gateway with slash commands), once the modules are up. */
  serve?(surfaces: Partial<Surfaces>): Promise<void>;
  close(): Promise<void>;
}

/** Every platform's checks of its other identities, by identity: one identity's checks from each platform it is on, side by side. */
export function identityChecks(running: readonly RunningPlatform[]): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const r of running) for (const [identity, checks] of Object.entries(r.identityReadiness?.() ?? {})) out[identity] = { ...out[identity], ...checks };
  return out;
}

/**
 * What keeps one identity's bot on one platform from speaking, for the status page: its token
 * refused (the platform's checks named `…token`), as `token: rejected by Discord (401)`, or its
 * workspace not installed (`…install`), as `install: not installed`.
 */
export function tokenTroubles(running: readonly RunningPlatform[], platform: string, as: string): string[] {
  const r = running.find((x) => x.facets.name === platform);
  // The default bot's checks are the platform's own, and (where its refused token leaves the replica ready) its identity checks under `default`.
  const checks = r === undefined ? {} : { ...(as === DEFAULT_IDENTITY ? r.readiness() : {}), ...(r.identityReadiness?.()[as] ?? {}) };
  // `token` (`slack_token`, `token:ops`): refused; `install` (`slack_install`): not installed, or uninstalled.
  return Object.entries(checks).flatMap(([name, state]) => {
    const what = ['token', 'install'].find((w) => name.split(':')[0]?.endsWith(w));
    return what === undefined ? [] : [`${what}: ${state}`];
  });
}

/** A platform, as its folder's `index.ts` exports it. `C` is its own settings. */
export interface PlatformPlugin<C = unknown> {
  readonly name: string;
  /** Why the platform is off when its settings are absent, e.g. `HERALD_IRC_URL is unset`. */
  readonly off: string;
  /** Its migrations, by name, declared in its folder (applied with migrations/'s, ordered by name). */
  readonly migrations?: Readonly<Record<string, Migration>>;
  /**
   * Read and check this platform's variables (problems go to `env`); undefined when the platform
   * is not configured in this environment.
   */
  config(env: EnvReader, core: CoreSettings): C | undefined;
  /** The names of its identities besides `default` (src/infra/policy/identity.ts) its settings configure. */
  identities?(config: C): readonly string[];
  /** Checks that must pass before the store opens (a token the platform rejects stops start-up). */
  check?(config: C, log: Logger): Promise<void>;
  start(config: C, services: PlatformServices): Promise<RunningPlatform>;
  /** A local double of the platform for sandbox mode (src/platforms/sandboxes.ts says when it runs). */
  readonly sandbox?: SandboxHook<C>;
  /**
   * The pages for a browser its running platform serves outside the API's contract
   * (RunningPlatform.routes), declared here so guides and walks know them without starting it.
   */
  readonly pages?: readonly { readonly method: 'GET'; readonly path: string; readonly what: string }[];
}

/**
 * A platform's sandbox: started in sandbox mode, before Herald starts, when the platform is left to
 * it, and given to Herald as the platform's settings.
 */
export interface SandboxHook<C> {
  /**
   * Whether the environment's settings (undefined: none) leave the platform to its sandbox.
   * Default: when there are none.
   */
  needed?(config: C | undefined): boolean;
  /**
   * Why Herald is in sandbox mode, said when this platform is the default home and is left to its
   * sandbox (e.g. a refused `herald dispatch`): which setting is missing.
   */
  readonly reason?: string;
  start(options: SandboxOptions<C>): Promise<PlatformSandbox<C>>;
}

/** Where a platform's sandbox keeps its state and listens, and what the environment set. */
export interface SandboxOptions<C = unknown> {
  /** HERALD_DATA_DIR: the sandbox keeps its world here across restarts. */
  readonly dataDir: string;
  readonly host: string;
  /** The port it serves on (0: any free one). */
  readonly port: number;
  readonly core: CoreSettings;
  /** The platform's own settings from the environment, which the sandbox completes (undefined: none). */
  readonly settings?: C | undefined;
}

/** A platform's sandbox, started. */
export interface PlatformSandbox<C> {
  /** The sandbox's address (http://host:port), logged when Herald starts. */
  readonly url: string;
  /** The page where a person sees the sandbox's world, shown in the banner. Default `url`. */
  readonly page?: string;
  /** Said beside the page in the banner: why Herald runs on this sandbox. */
  readonly remark?: string;
  /** The platform's settings pointing at the sandbox. */
  readonly config: C;
  /** Banner lines that say what is in it (channels to map, people to pair as). */
  readonly notes?: readonly string[];
  /**
   * The first walk the banner prints (map a destination, post to it): the guild_id and channel_id
   * of the sandbox's place to try.
   */
  readonly tryIt?: { readonly guildId: string; readonly channelId: string };
  /** What Herald is told of the sandbox: where its message links point, whose media it may fetch. */
  readonly site?: { readonly messageLinkBase?: string; readonly mediaOrigins?: readonly string[] };
  /** Called once Herald runs, with what the sandbox's page may read from it. */
  attach?(herald: SandboxHerald): void;
  close(): Promise<void>;
}

/** What a sandbox may read from the running Herald. */
export interface SandboxHerald {
  /** The destinations Herald has mapped, shown on a sandbox's page beside its channels. */
  destinations(): Promise<readonly MappedDestination[]>;
}

/** One destination mapping, as the destinations module stores it. */
export interface MappedDestination {
  readonly guild_id: string;
  readonly destination: string;
  readonly channel_id: string;
  /** The platform the channel is on (discord, slack, …): a sandbox's page shows another's as such. */
  readonly transport?: string;
}

/** A platform definition, typed where it is written. */
export function definePlatform<C>(plugin: PlatformPlugin<C>): PlatformPlugin<C> {
  return plugin;
}
