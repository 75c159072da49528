import path from 'node:path';
import type { Config } from './config-types.js';
import { EnvReader, STRONG_TOKEN, type Env } from './infra/env.js';
import type { HeraldModule } from './modules/contract.js';
import { MODULES } from './modules/modules.js';
import { DEFAULT_HOME, PLATFORMS } from './platforms/platforms.js';
import type { PlatformPlugin } from './platforms/plugin.js';
import { sandboxedPlatforms } from './platforms/sandboxes.js';

export { STRONG_TOKEN };

export type { Config } from './config-types.js';

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Parse the environment, each platform's and each module's variables by its own folder; reports
 * every problem at once. `modules`: the module list Herald starts (src/modules/modules.ts);
 * `platformList`: the platforms it can speak (src/platforms/platforms.ts), unless a test adds its own.
 */
export function loadConfig(env: Env = process.env, modules: readonly HeraldModule[] = MODULES, platformList: readonly PlatformPlugin[] = PLATFORMS): Config {
  const read = new EnvReader(env);
  const text = (name: string): string | undefined => read.text(name);
  const int = (name: string, fallback: number, min: number, max: number): number => read.int(name, fallback, min, max);
  const kinds = (): ('dm' | 'edit')[] => {
    const list = read.list('HERALD_DISABLED_KINDS');
    const bad = list.filter((k) => k !== 'dm' && k !== 'edit');
    if (bad.length > 0) read.problem(`HERALD_DISABLED_KINDS may list only dm and edit (got ${bad.join(', ')})`);
    return list.filter((k): k is 'dm' | 'edit' => k === 'dm' || k === 'edit');
  };
  const databaseUrl = text('DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) read.problem('DATABASE_URL must be a postgres:// or postgresql:// URL');
  const port = int('PORT', 8787, 0, 65535);
  const leaseMs = int('HERALD_LEASE_MS', 60_000, 500, 3_600_000);
  const singletonTtlMs = int('HERALD_SINGLETON_TTL_MS', 8_000, 500, 600_000);
  const transport = text('HERALD_TRANSPORT') ?? DEFAULT_HOME;
  const platforms: Record<string, unknown> = {};
  for (const t of platformList) {
    const settings = t.config(read, { leaseMs, home: transport });
    if (settings !== undefined) platforms[t.name] = settings;
  }
  const chatTransport = text('HERALD_CHAT_TRANSPORT') ?? (platforms['irc'] !== undefined ? 'irc' : transport);
  // Without the default home's settings (a Discord token) the platforms left to a sandbox run on one.
  const sandboxed = sandboxedPlatforms(platforms, platformList);
  // Each names a platform of the registry that this environment configures.
  for (const [variable, name] of [['HERALD_TRANSPORT', transport], ['HERALD_CHAT_TRANSPORT', chatTransport]] as const) {
    if (!platformList.some((t) => t.name === name)) read.problem(`${variable} must be one of ${platformList.map((t) => t.name).join(', ')}`);
    else if (platforms[name] === undefined && !sandboxed.includes(name)) read.problem(`${variable} is ${name} but ${platformList.find((t) => t.name === name)?.off ?? 'it is off'}`);
  }
  const config: Config = {
    port,
    host: text('HOST') ?? '127.0.0.1',
    bridgeToken: read.token('MCP_BRIDGE_TOKEN'),
    adminToken: read.token('HERALD_ADMIN_TOKEN'),
    databaseUrl,
    dataDir: path.resolve(text('HERALD_DATA_DIR') ?? './data'),
    dbStartupTimeoutMs: int('HERALD_DB_STARTUP_TIMEOUT_MS', 60_000, 0, 3_600_000),
    dbPoolSize: int('HERALD_DB_POOL_SIZE', 16, 2, 500),
    sandboxPort: int('HERALD_SANDBOX_PORT', port === 0 ? 0 : port + 1, 0, 65535),
    metricsPort: text('HERALD_METRICS_PORT') === 'off' ? undefined : int('HERALD_METRICS_PORT', port === 0 ? 0 : Math.min(port + 2, 65535), 0, 65535),
    metricsHost: text('HERALD_METRICS_HOST') ?? '127.0.0.1',
    logLevel: text('LOG_LEVEL') ?? 'info',
    leaseMs,
    singletonTtlMs,
    singletonDownMs: int('HERALD_SINGLETON_DOWN_MS', 3 * singletonTtlMs, 500, 3_600_000),
    pollMs: int('HERALD_POLL_MS', 1_000, 10, 60_000),
    nonceWindowMs: int('HERALD_NONCE_WINDOW_MS', 60_000, 0, 600_000),
    maxAttempts: int('HERALD_MAX_ATTEMPTS', 10, 1, 1_000),
    retryBaseMs: int('HERALD_RETRY_BASE_MS', 1_000, 1, 600_000),
    dispatchConcurrency: int('HERALD_DISPATCH_CONCURRENCY', 8, 1, 256),
    claimSweepMs: int('HERALD_CLAIM_SWEEP_MS', 5_000, 0, 600_000),
    shutdownGraceMs: int('HERALD_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    disabledKinds: kinds(),
    heraldUrl: read.url('HERALD_URL') ?? `http://127.0.0.1:${port === 0 ? 8787 : port}`,
    mcpStatePath: path.resolve(text('HERALD_MCP_STATE') ?? path.join(text('HERALD_DATA_DIR') ?? './data', 'mcp-state.json')),
    mcpWaitMs: int('HERALD_MCP_WAIT_MS', 15_000, 0, 600_000),
    mcpPort: int('HERALD_MCP_PORT', 8790, 0, 65535),
    mcpToken: read.token('HERALD_MCP_TOKEN'),
    mcpAllowedOrigins: Object.freeze(read.list('HERALD_MCP_ALLOWED_ORIGINS')),
    mcpInboxNotify: read.onOff('HERALD_MCP_INBOX_NOTIFY', false),
    mcpOAuthIssuer: read.url('HERALD_MCP_OAUTH_ISSUER'),
    mcpOAuthJwksUrl: read.url('HERALD_MCP_OAUTH_JWKS_URL'),
    mcpResource: read.url('HERALD_MCP_RESOURCE'),
    mcpFilesDir: text('HERALD_MCP_FILES_DIR') === undefined ? undefined : path.resolve(text('HERALD_MCP_FILES_DIR') as string),
    policyPath: text('HERALD_POLICY') === undefined ? undefined : path.resolve(text('HERALD_POLICY') as string),
    modules: Object.freeze(Object.fromEntries(modules.flatMap((m) => (m.config === undefined ? [] : [[m.name, m.config(read)]])))),
    transport,
    chatTransport,
    platforms: Object.freeze(platforms),
    sandboxed: Object.freeze(sandboxed),
  };
  const levels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  if (!levels.includes(config.logLevel)) read.problem(`LOG_LEVEL must be one of ${levels.join(', ')}`);
  if (read.problems.length > 0) throw new ConfigError(read.problems);
  return Object.freeze(config);
}
