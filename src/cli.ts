import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Herald } from './app.js';
import { packageVersion, parseArgs } from './cli-help.js';
import { ConfigError, isSandboxMode, loadConfig, STRONG_TOKEN, unknownVariables, type Config } from './config.js';
import { checkDataDir } from './platform/db/data-dir-lock.js';
import { checkPortFree, checkPortsFree, listenProblem, StartupError } from './platform/startup.js';
import { discordTokenRejected } from './transports/discord/discord-token.js';
import type { DiscordConfig } from './transports/discord/index.js';

// Each command imports only the modules it runs (dynamic imports below), so `herald --help` and
// `herald mcp` start without loading discord.js, Koa or the database drivers.

async function main(argv: string[]): Promise<number> {
  const invocation = parseArgs(argv);
  switch (invocation.kind) {
    case 'help':
      console.log(invocation.text);
      return 0;
    case 'version':
      console.log(await packageVersion());
      return 0;
    case 'usage-error':
      console.error(invocation.message);
      return 2;
    case 'run':
      break;
  }
  const { command } = invocation;
  // A misspelled variable would otherwise be silently ignored (and its default used).
  for (const { name, suggestion } of unknownVariables()) {
    console.error(`herald: warning: ${name} is not a Herald variable and is ignored${suggestion !== undefined ? `: did you mean ${suggestion}?` : ' (README.md, Configuration, lists them all)'}`);
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`herald: ${err.message}`);
      return 2;
    }
    throw err;
  }
  switch (command) {
    case 'migrate': {
      const { openStore } = await import('./platform/db/database.js');
      const { migrateToLatest } = await import('./platform/db/migrate.js');
      const { createLogger } = await import('./platform/log.js');
      const store = await openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
      try {
        const result = await migrateToLatest(store.db, { startupTimeoutMs: config.dbStartupTimeoutMs, databaseUrl: config.databaseUrl, log: createLogger(config.logLevel, process.stderr) });
        const applied = result.results?.filter((r) => r.status === 'Success').map((r) => r.migrationName) ?? [];
        console.log(applied.length > 0 ? `applied: ${applied.join(', ')}` : 'already up to date');
      } finally {
        await store.close();
      }
      return 0;
    }
    case 'mcp': {
      const { createLogger } = await import('./platform/log.js');
      const { runStdio, startHttp } = await import('./mcp/run.js');
      // stdout carries the MCP protocol: logs go to stderr.
      const log = createLogger(config.logLevel, process.stderr);
      const bridgeToken = config.bridgeToken ?? (await savedSandboxToken(config));
      if (bridgeToken === undefined) {
        console.error('herald: MCP_BRIDGE_TOKEN is not set (and no sandbox token was found in HERALD_DATA_DIR)');
        return 2;
      }
      if (invocation.http) {
        if (config.mcpToken === undefined) {
          console.error('herald: HERALD_MCP_TOKEN must be set for --http (at least 43 base64url characters)');
          return 2;
        }
        await checkPortFree(config.host, config.mcpPort, 'HERALD_MCP_PORT');
        const { url, server } = await startHttp(config, bridgeToken, config.mcpToken, log);
        // Listening for the stop before saying it is up: whoever reads the line may signal at once.
        const stopped = waitForSignal();
        console.error(`herald mcp: Streamable HTTP at ${url} (Authorization: Bearer $HERALD_MCP_TOKEN)`);
        await stopped;
        // Idle keep-alive connections of MCP clients would hold close() open.
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
        return 0;
      }
      await runStdio(config, bridgeToken, log);
      return 0;
    }
    case 'commands': {
      const discord = config.platforms['discord'] as DiscordConfig | undefined;
      if (discord?.token === undefined) {
        console.error('herald: DISCORD_TOKEN is not set (sandbox mode registers its commands itself at start-up)');
        return 2;
      }
      const { registerCommands } = await import('./transports/discord/gateway-client.js');
      const { allCommands } = await import('./modules/registry.js');
      const names = await registerCommands(discord.token, discord.apiUrl, (await allCommands()).map((c) => c.definition)).catch((err: unknown) => {
        const status = typeof err === 'object' && err !== null ? (err as { status?: unknown }).status : undefined;
        throw status === 401 ? discordTokenRejected(status, err) : err;
      });
      console.log(`registered: ${names.map((n) => `/${n}`).join(', ')}`);
      return 0;
    }
    case 'serve':
    case 'dispatch': {
      // Tokens the operator supplied are theirs: the banner shows only the ones Herald made up.
      const supplied = { bridge: config.bridgeToken !== undefined, admin: config.adminToken !== undefined };
      let sandbox: SandboxInfo | undefined;
      const sandboxMode = isSandboxMode(config);
      if (sandboxMode && command !== 'serve') {
        console.error('herald: DISCORD_TOKEN is not set: `herald dispatch` needs the bot token (sandbox mode runs everything in one `herald serve`)');
        return 2;
      }
      // What the operator must fix stops start-up before anything slow starts (Discord, the store,
      // the gateway), naming the variable to change: every port, then the data folder.
      await checkPortsFree([
        ...(command === 'serve' ? [{ host: config.host, port: config.port, variable: 'PORT' }] : []),
        ...(sandboxMode ? [{ host: config.host, port: config.sandboxPort, variable: 'HERALD_SANDBOX_PORT' }] : []),
        ...(config.metricsPort !== undefined ? [{ host: config.metricsHost, port: config.metricsPort, variable: 'HERALD_METRICS_PORT' }] : []),
      ]);
      // Sandbox mode keeps its tokens and its Discord there even beside PostgreSQL.
      if (config.databaseUrl === undefined || sandboxMode) await checkDataDir(config.dataDir, config.databaseUrl === undefined);
      const { createLogger } = await import('./platform/log.js');
      const log = createLogger(config.logLevel);
      let sandboxDiscord: import('./sandbox/sandbox.js').DiscordSandbox | undefined;
      if (sandboxMode) {
        config = await withSandboxTokens(config);
        // The Discord sandbox is a development double: loaded here, in sandbox mode only, and
        // handed to Herald as if it were Discord (its URL and bot token).
        const { DiscordSandbox, SANDBOX_IDS } = await import('./sandbox/sandbox.js');
        const fake = new DiscordSandbox({ stateFile: path.join(config.dataDir, 'sandbox-discord.json') });
        await fake.start(config.sandboxPort, config.host).catch((err: unknown) => {
          throw listenProblem(err, config.host, config.sandboxPort, 'HERALD_SANDBOX_PORT') ?? err;
        });
        sandbox = { url: fake.url, ids: SANDBOX_IDS, close: () => fake.close() };
        sandboxDiscord = fake;
        const discord = config.platforms['discord'] as DiscordConfig;
        const sandboxed: DiscordConfig = { ...discord, token: fake.botToken, apiUrl: fake.apiUrl, chatGuild: discord.chatGuild ?? SANDBOX_IDS.guild };
        config = Object.freeze({ ...config, platforms: Object.freeze({ ...config.platforms, discord: Object.freeze(sandboxed) }) });
        // Every other platform with a sandbox and no settings gets its own, on the ports after Discord's.
        const started = await startPlatformSandboxes(config).catch(async (err: unknown) => {
          await fake.close();
          throw err;
        });
        config = Object.freeze({ ...config, platforms: Object.freeze({ ...config.platforms, ...started.platforms }) });
        sandbox = { ...sandbox, others: started.sandboxes, close: async () => void (await Promise.all([fake.close(), ...started.sandboxes.map((o) => o.close())])) };
      } else if (command === 'serve') {
        // Sandbox mode makes both up; elsewhere an unset one turns a whole API surface off.
        const unset = [
          ...(config.bridgeToken === undefined ? ['MCP_BRIDGE_TOKEN (every /mcp/ request will answer 503)'] : []),
          ...(config.adminToken === undefined ? ['HERALD_ADMIN_TOKEN (every /admin/ request will answer 503)'] : []),
        ];
        if (unset.length > 0) log.warn(`not set: ${unset.join('; ')}`);
      }
      const { startHerald } = await import('./app.js');
      let herald: Herald;
      try {
        herald = await startHerald({ config, log, roles: { http: command === 'serve', dispatcher: true }, ...(sandbox !== undefined ? { messageLinkBase: sandbox.url, mediaOrigins: [sandbox.url] } : {}) });
      } catch (err) {
        await sandbox?.close();
        throw err;
      }
      if (sandboxDiscord !== undefined) {
        // The sandbox page shows which destinations Herald has mapped, beside the channels.
        const { listDestinations } = await import('./modules/destinations/destination.repository.js');
        const { tablesOf } = await import('./platform/db/tables.js');
        const db = tablesOf<import('./modules/destinations/destination.table.js').DestinationsDb>(herald.store.db);
        sandboxDiscord.destinations = async () => (await listDestinations(db)).map(({ guild_id, destination, channel_id }) => ({ guild_id, destination, channel_id }));
      }
      // Listening for the stop before saying it is up: whoever reads the line may signal at once.
      const stopped = waitForSignal();
      if (command === 'serve') printBanner(config, herald, supplied, sandbox);
      log.info({ url: herald.url, sandbox: sandbox?.url, metrics: herald.metricsUrl, store: herald.store.kind, role: command }, 'herald started');
      await stopped;
      log.info('stopping: no new claims; finishing in-flight deliveries');
      await herald.close();
      await sandbox?.close();
      log.info('stopped');
      return 0;
    }
  }
}

/** The bridge token `npm start` generated in sandbox mode, so `herald mcp` works beside it. */
async function savedSandboxToken(config: Config): Promise<string | undefined> {
  try {
    const saved = JSON.parse(await readFile(path.join(config.dataDir, 'sandbox-tokens.json'), 'utf8')) as { bridge?: string };
    return saved.bridge;
  } catch {
    return undefined;
  }
}

/** Sandbox mode only: make up the tokens a new user has not set, and keep them in the data folder. */
async function withSandboxTokens(config: Config): Promise<Config> {
  if (config.bridgeToken !== undefined && config.adminToken !== undefined) return config;
  const file = path.join(config.dataDir, 'sandbox-tokens.json');
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

interface SandboxInfo {
  url: string;
  ids: { guild: string; channels: { alerts: string } };
  /** The other platforms' sandboxes (src/transports/plugin.ts), by platform name. */
  others?: readonly OtherSandbox[];
  close(): Promise<void>;
}

interface OtherSandbox {
  name: string;
  url: string;
  notes: readonly string[];
  close(): Promise<void>;
}

/** Start the sandbox of every platform sandbox mode runs locally (`config.sandboxed`), in registry order. */
async function startPlatformSandboxes(config: Config): Promise<{ platforms: Record<string, unknown>; sandboxes: OtherSandbox[] }> {
  const { TRANSPORTS } = await import('./transports/registry.js');
  const platforms: Record<string, unknown> = {};
  const sandboxes: OtherSandbox[] = [];
  // The ports after Discord's sandbox, skipping the API's, the metrics' (by default PORT+2) and
  // `herald mcp --http`'s (HERALD_MCP_PORT, 8790), which a newcomer starts beside it.
  const taken = new Set([config.port, config.sandboxPort, config.metricsPort, config.mcpPort]);
  let next = config.sandboxPort + 1;
  try {
    for (const name of config.sandboxed) {
      const plugin = TRANSPORTS.find((t) => t.name === name);
      if (plugin?.sandbox === undefined) continue;
      while (taken.has(next)) next += 1;
      const port = config.sandboxPort === 0 ? 0 : next;
      taken.add(port);
      const started = await plugin.sandbox({ dataDir: config.dataDir, host: config.host, port, core: { leaseMs: config.leaseMs, home: config.transport } }).catch((err: unknown) => {
        throw listenProblem(err, config.host, port, 'HERALD_SANDBOX_PORT') ?? err;
      });
      platforms[name] = started.config;
      sandboxes.push({ name, url: started.url, notes: started.notes ?? [], close: () => started.close() });
    }
  } catch (err) {
    await Promise.all(sandboxes.map((o) => o.close()));
    throw err;
  }
  return { platforms, sandboxes };
}

/** The request_id of the banner's "Try it" post. */
const BANNER_REQUEST_ID = 'f'.repeat(64);

function printBanner(config: Config, herald: Herald, supplied: { bridge: boolean; admin: boolean }, sandbox: SandboxInfo | undefined): void {
  // Never echo a secret from the environment: it would end up in terminal scrollback and logs.
  const token = (name: string, value: string | undefined, fromEnvironment: boolean): string =>
    fromEnvironment ? `  ${name}: (from your environment)` : `  export ${name}=${value ?? ''}`;
  // Every place an operator opens, one per line, the labels aligned.
  const place = (label: string, where: string): string => `  ${`${label}:`.padEnd(17)}${where}`;
  const lines = [
    '',
    `Herald is running (${herald.store.kind === 'pglite' ? `embedded PGlite in ${config.dataDir}` : 'PostgreSQL'}).`,
    place('API', `${herald.url}/mcp/`),
    place('API docs', `${herald.url}/docs`),
    place('Archive UI', `${herald.url}/ui/archive  (sign in with HERALD_ADMIN_TOKEN)`),
    ...(herald.metricsUrl !== undefined
      ? [place('Status page', `${herald.metricsUrl}/`), place('Metrics', `${herald.metricsUrl}/metrics  (Prometheus)`)]
      : [place('Metrics', 'off (HERALD_METRICS_PORT=off)')]),
  ];
  if (sandbox !== undefined) {
    const SANDBOX_IDS = sandbox.ids;
    lines.push(
      place('Discord sandbox', `${sandbox.url}/sandbox  (no DISCORD_TOKEN: messages go to this local Discord)`),
      ...(sandbox.others ?? []).flatMap((o) => [place(`${o.name[0]?.toUpperCase() ?? ''}${o.name.slice(1)} sandbox`, o.url), ...o.notes.map((n) => `${' '.repeat(19)}${n}`)]),
      '',
      `Tokens (sandbox mode; kept in ${path.join(config.dataDir, 'sandbox-tokens.json')}):`,
      token('MCP_BRIDGE_TOKEN', config.bridgeToken, supplied.bridge),
      token('HERALD_ADMIN_TOKEN', config.adminToken, supplied.admin),
      '',
      'Try it:',
      `  curl -X PUT -H "Authorization: Bearer $HERALD_ADMIN_TOKEN" -d '{"channel_id":"${SANDBOX_IDS.channels.alerts}"}' ${herald.url}/admin/destinations/${SANDBOX_IDS.guild}/alerts`,
      // An id no other example uses (README, Swagger): the same id with another body would be refused (422).
      `  curl -H "Authorization: Bearer $MCP_BRIDGE_TOKEN" -d '{"request_id":"${BANNER_REQUEST_ID}","kind":"post","target":{"guild_id":"${SANDBOX_IDS.guild}","destination":"alerts"},"body":{"content":"hello"}}' ${herald.url}/mcp/deliveries`,
      `  curl -H "Authorization: Bearer $MCP_BRIDGE_TOKEN" ${herald.url}/mcp/deliveries/${BANNER_REQUEST_ID}`,
    );
  }
  console.log(`${lines.join('\n')}\n`);
}

/**
 * Resolves on the first SIGTERM or SIGINT. Call it before announcing that Herald is up: until a
 * handler is installed a signal kills the process outright, and the reader of the announcement may
 * send one the moment it reads it (before the next statement runs on a busy machine). The handlers
 * stay installed until the process exits: a Ctrl-C under `npm start` reaches Herald twice (the
 * terminal signals the whole process group, and npm relays what it got to its child), and with no
 * handler left the second one would kill Herald halfway through its graceful stop. The stop is bounded (HERALD_SHUTDOWN_GRACE_MS), so a
 * repeated signal does not cut it short either; SIGKILL does.
 */
function waitForSignal(): Promise<void> {
  return new Promise((resolve) => {
    let first: number | undefined;
    let told = false;
    const onSignal = (): void => {
      if (first === undefined) {
        first = Date.now();
        resolve();
        return;
      }
      // A relayed copy arrives within milliseconds; a person pressing Ctrl-C again is told once.
      if (!told && Date.now() - first > 1_000) {
        told = true;
        console.error(`herald: already stopping (in-flight work gets up to HERALD_SHUTDOWN_GRACE_MS to finish); kill -9 ${process.pid} stops at once`);
      }
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`herald: ${err instanceof Error ? err.message : String(err)}`);
    // A problem the operator fixes in the environment exits 2, like a configuration error.
    process.exit(err instanceof StartupError ? 2 : 1);
  },
);
