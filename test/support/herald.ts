import { randomBytes } from 'node:crypto';
import { startHerald, type Herald } from '../../src/app.js';
import type { HeraldModule, Roles } from '../../src/modules/contract.js';
import type { Clock } from '../../src/infra/clock.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createLogger } from '../../src/infra/log.js';
import { DiscordSandbox, SANDBOX_IDS, type SandboxOptions } from '../../src/platforms/discord/sandbox/sandbox.js';
import { client, type Client } from './client.js';
import { testDatabase, type TestDatabase } from './db.js';
import { waitForDelivery } from './wait.js';

export const IDS = SANDBOX_IDS;
export const REQ_A = 'a'.repeat(64);
export const REQ_B = 'b'.repeat(64);

export function newToken(): string {
  return randomBytes(32).toString('base64url');
}
export function newRequestId(): string {
  return randomBytes(32).toString('hex');
}

/** A controllable clock for retention tests. */
export class TestClock implements Clock {
  offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
}

export interface TestHerald {
  url: string;
  herald: Herald;
  sandbox: DiscordSandbox;
  db: TestDatabase;
  bridgeToken: string;
  adminToken: string;
  /** Authenticated with the bridge token. */
  bridge: Client;
  /** Authenticated with the admin token. */
  admin: Client;
  env: Record<string, string>;
  /** Map (guild, destination) → channel through the admin API. */
  mapDestination(destination?: string, channelId?: string): Promise<void>;
  waitForState(requestId: string, state: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

export interface TestHeraldOptions {
  env?: Record<string, string>;
  clock?: Clock;
  sandbox?: SandboxOptions;
  /** Reuse a sandbox (e.g. across a restart). */
  useSandbox?: DiscordSandbox;
  useDb?: TestDatabase;
  /** What this process does (default: serve HTTP and dispatch), as for a replica of a larger deployment. */
  roles?: Roles;
  /** The modules to start (default: src/modules/modules.ts), e.g. one more capability from a test's own folder. */
  modules?: readonly HeraldModule[];
  /** Where Herald's JSON log goes (default standard output), e.g. a test reading its lines. */
  logTo?: NodeJS.WritableStream;
}

/**
 * Herald running in this process on a free port, on a fresh database, talking to a sandbox
 * Discord through discord.js, exactly as in production with a real token.
 */
export async function startTestHerald(options: TestHeraldOptions = {}): Promise<TestHerald> {
  const sandbox = options.useSandbox ?? (await new DiscordSandbox(options.sandbox).start());
  const db =
    options.useDb ??
    (await testDatabase().catch(async (err: unknown) => {
      if (options.useSandbox === undefined) await sandbox.close().catch(() => undefined);
      throw err;
    }));
  const bridgeToken = newToken();
  const adminToken = newToken();
  const env = heraldEnv({ sandbox, db, bridgeToken, adminToken }, {
    PORT: '0',
    HOST: '127.0.0.1',
    HERALD_POLL_MS: '200',
    HERALD_RETRY_BASE_MS: '50',
    HERALD_DISCORD_TIMEOUT_MS: '3000',
    HERALD_LEASE_MS: '10000',
    HERALD_SHUTDOWN_GRACE_MS: '2000',
    LOG_LEVEL: process.env['TEST_LOG_LEVEL'] ?? 'silent',
    ...(options.env ?? {}),
  });
  let herald: Herald;
  let config: Config;
  try {
    config = options.modules !== undefined ? loadConfig(env, options.modules) : loadConfig(env);
    // The sandbox's CDN is the one private origin the media archive may download from (as in sandbox mode).
    herald = await startHerald({ config, log: createLogger(config.logLevel, options.logTo), mediaOrigins: [sandbox.url], ...(options.clock ? { clock: options.clock } : {}), ...(options.roles ? { roles: options.roles } : {}), ...(options.modules ? { modules: options.modules } : {}) });
  } catch (err) {
    // Nothing this call made outlives its failure: files share their workers (vitest.config.ts).
    if (options.useSandbox === undefined) await sandbox.close().catch(() => undefined);
    if (options.useDb === undefined) await db.drop().catch(() => undefined);
    throw err;
  }
  const url = herald.url ?? '';
  const bridge = client(url, config.bridgeToken);
  const admin = client(url, config.adminToken);
  return {
    url,
    herald,
    sandbox,
    db,
    bridgeToken: config.bridgeToken ?? '',
    adminToken: config.adminToken ?? '',
    bridge,
    admin,
    env,
    async mapDestination(destination = 'alerts', channelId = IDS.channels.alerts) {
      const res = await admin.put(`/admin/destinations/${IDS.guild}/${destination}`, { channel_id: channelId });
      if (res.status !== 200) throw new Error(`mapping failed: ${res.status} ${res.text}`);
    },
    waitForState: (requestId, state, timeoutMs = 20_000) => waitForDelivery(bridge, requestId, state, undefined, timeoutMs),
    async close() {
      await herald.close();
      if (options.useSandbox === undefined) await sandbox.close();
      if (options.useDb === undefined) await db.drop();
    },
  };
}

/**
 * The environment of a Herald (in this process or a child) on a test database and sandbox, with
 * short timings so tests wait seconds, not minutes; `extra` overrides.
 */
export function heraldEnv(
  on: { sandbox: DiscordSandbox; db: TestDatabase; bridgeToken: string; adminToken: string },
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    PORT: '0',
    // A free port even for tests that fix PORT (to restart on the same URL).
    HERALD_METRICS_PORT: '0',
    MCP_BRIDGE_TOKEN: on.bridgeToken,
    HERALD_ADMIN_TOKEN: on.adminToken,
    HERALD_DATA_DIR: on.db.dataDir,
    DISCORD_TOKEN: on.sandbox.botToken,
    DISCORD_API_URL: on.sandbox.apiUrl,
    HERALD_POLL_MS: '100',
    ...(on.db.databaseUrl !== undefined ? { DATABASE_URL: on.db.databaseUrl } : {}),
    ...extra,
  };
}

export function post(requestId: string, content = 'hello', destination = 'alerts'): Record<string, unknown> {
  return { request_id: requestId, kind: 'post', target: { guild_id: IDS.guild, destination }, body: { content } };
}
