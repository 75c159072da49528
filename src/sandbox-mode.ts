import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Herald } from './app.js';
import { STRONG_TOKEN, type Config } from './config.js';
import { listenProblem } from './infra/startup.js';
import type { PlatformSandbox, SandboxHerald } from './platforms/plugin.js';

// Sandbox mode's wiring (`herald serve` with no settings for the default home platform): every
// platform left to its sandbox (`config.sandboxed`, src/platforms/sandboxes.ts) is started through
// its plugin's `sandbox` hook, in one loop, and Herald is given their settings. Which platforms
// those are, and what each sandbox is, belongs to the platforms: nothing here names one.

/** A platform's sandbox, started. */
export interface StartedSandbox {
  readonly name: string;
  readonly sandbox: PlatformSandbox<unknown>;
}

/** The sandboxes of sandbox mode, started, and what Herald is given of them. */
export interface Sandboxes {
  /** In registry order; the first listens on HERALD_SANDBOX_PORT. */
  readonly started: readonly StartedSandbox[];
  /** Herald's configuration with each sandboxed platform's settings pointing at its sandbox. */
  readonly config: Config;
  /** What Herald is told of them (src/app.ts `HeraldOptions`): where message links point, whose media it may fetch. */
  readonly site: { messageLinkBase?: string; mediaOrigins?: readonly string[] };
  /** Give each sandbox what it reads from the running Herald. */
  attach(herald: Herald): Promise<void>;
  close(): Promise<void>;
}

/**
 * Start the sandbox of every platform in `config.sandboxed`, in registry order: the first on
 * HERALD_SANDBOX_PORT, each other on the next free port after it. One that cannot start stops
 * start-up, and the ones already started are closed.
 */
export async function startSandboxes(config: Config): Promise<Sandboxes> {
  const { PLATFORMS } = await import('./platforms/platforms.js');
  const started: StartedSandbox[] = [];
  // The ports after the first, skipping the API's, the metrics' (by default PORT+2) and
  // `herald mcp --http`'s (HERALD_MCP_PORT, 8790), which a newcomer starts beside it.
  const taken = new Set([config.port, config.sandboxPort, config.metricsPort, config.mcpPort]);
  let next = config.sandboxPort + 1;
  try {
    for (const name of config.sandboxed) {
      const plugin = PLATFORMS.find((t) => t.name === name);
      if (plugin?.sandbox === undefined) continue;
      let port = config.sandboxPort;
      if (started.length > 0) {
        while (taken.has(next)) next += 1;
        port = config.sandboxPort === 0 ? 0 : next;
        taken.add(port);
      }
      const options = { dataDir: config.dataDir, host: config.host, port, core: { leaseMs: config.leaseMs, home: config.transport }, settings: config.platforms[name] };
      const sandbox = await plugin.sandbox.start(options).catch((err: unknown) => {
        throw listenProblem(err, config.host, port, 'HERALD_SANDBOX_PORT') ?? err;
      });
      started.push({ name, sandbox });
    }
  } catch (err) {
    await Promise.all(started.map((s) => s.sandbox.close()));
    throw err;
  }
  const platforms = Object.fromEntries(started.map(({ name, sandbox }) => [name, sandbox.config]));
  const messageLinkBase = started.map((s) => s.sandbox.site?.messageLinkBase).find((base) => base !== undefined);
  return {
    started,
    config: Object.freeze({ ...config, platforms: Object.freeze({ ...config.platforms, ...platforms }) }),
    site: {
      ...(messageLinkBase !== undefined ? { messageLinkBase } : {}),
      mediaOrigins: started.flatMap((s) => s.sandbox.site?.mediaOrigins ?? []),
    },
    async attach(herald) {
      if (!started.some((s) => s.sandbox.attach !== undefined)) return;
      const view = await heraldView(herald);
      for (const { sandbox } of started) sandbox.attach?.(view);
    },
    close: async () => void (await Promise.all(started.map((s) => s.sandbox.close()))),
  };
}

/** What a sandbox's page reads from Herald: the destinations it has mapped. */
async function heraldView(herald: Herald): Promise<SandboxHerald> {
  const { listDestinations } = await import('./modules/destinations/destination.repository.js');
  const { tablesOf } = await import('./infra/db/tables.js');
  const db = tablesOf<import('./modules/destinations/destination.table.js').DestinationsDb>(herald.store.db);
  return { destinations: async () => (await listDestinations(db)).map(({ guild_id, destination, channel_id, transport }) => ({ guild_id, destination, channel_id, transport })) };
}

/** Where sandbox mode keeps the tokens it made up. */
export function sandboxTokensFile(config: Config): string {
  return path.join(config.dataDir, 'sandbox-tokens.json');
}

/** The bridge token `npm start` generated in sandbox mode, so `herald mcp` works beside it. */
export async function savedSandboxToken(config: Config): Promise<string | undefined> {
  try {
    const saved = JSON.parse(await readFile(sandboxTokensFile(config), 'utf8')) as { bridge?: string };
    return saved.bridge;
  } catch {
    return undefined;
  }
}

/** Sandbox mode only: make up the tokens a new user has not set, and keep them in the data folder. */
export async function withSandboxTokens(config: Config): Promise<Config> {
  if (config.bridgeToken !== undefined && config.adminToken !== undefined) return config;
  const file = sandboxTokensFile(config);
  let saved: { bridge?: string; admin?: string } = {};
  try {
    saved = JSON.parse(await readFile(file, 'utf8')) as typeof saved;
  } catch {
    // First run: none saved yet.
  }
  const fresh = (): string => randomBytes(32).toString('base64url');
  const bridge = config.bridgeToken ?? (saved.bridge !== undefined && STRONG_TOKEN.test(saved.bridge) ? saved.bridge : fresh());
  const admin = config.adminToken ?? (saved.admin !== undefined && STRONG_TOKEN.test(saved.admin) ? saved.admin : fresh());
  await mkdir(config.dataDir, { recursive: true });
  await writeFile(file, `${JSON.stringify({ bridge, admin }, null, 2)}\n`, { mode: 0o600 });
  return Object.freeze({ ...config, bridgeToken: bridge, adminToken: admin });
}
