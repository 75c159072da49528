import path from 'node:path';
import type { Herald } from './app.js';
import { placeExports } from './banner-exports.js';
import { packageVersion, parseArgs } from './cli-help.js';
import { capabilities, capabilityLines } from './capabilities.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { unknownVariables } from './config-variables.js';
import { checkDataDir } from './infra/db/data-dir-lock.js';
import { checkPortFree, checkPortsFree, StartupError } from './infra/startup.js';
import { discordTokenRejected } from './platforms/discord/discord-token.js';
import type { DiscordConfig } from './platforms/discord/index.js';
import { isSandboxMode, sandboxReason } from './platforms/sandboxes.js';
import { sandboxTokensFile, savedSandboxToken, startSandboxes, withSandboxTokens, type Sandboxes } from './sandbox-mode.js';

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
  // `ps` and process accounting show which Herald this is (`herald serve`, `herald dispatch`).
  process.title = `herald ${command}`;
  // A misspelled variable would otherwise be silently ignored (and its default used).
  for (const { name, suggestion } of unknownVariables()) {
    console.error(`herald: warning: ${name} is not a Herald variable and is ignored${suggestion !== undefined ? `: did you mean ${suggestion}?` : ' (docs/guides/configuration.md lists them all)'}`);
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
      const { openStore } = await import('./infra/db/database.js');
      const { migrateToLatest } = await import('./infra/db/migrate.js');
      const { createLogger } = await import('./infra/log.js');
      // migrations/'s and those the platforms and modules declare in their folders.
      const { declaredMigrations } = await import('./modules/runner.js');
      const declared = declaredMigrations([...(await import('./platforms/platforms.js')).PLATFORMS, ...(await import('./modules/modules.js')).MODULES]);
      const store = await openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
      try {
        const result = await migrateToLatest(store.db, { startupTimeoutMs: config.dbStartupTimeoutMs, databaseUrl: config.databaseUrl, log: createLogger(config.logLevel, process.stderr), declared });
        const applied = result.results?.filter((r) => r.status === 'Success').map((r) => r.migrationName) ?? [];
        console.log(applied.length > 0 ? `applied: ${applied.join(', ')}` : 'already up to date');
      } finally {
        await store.close();
      }
      return 0;
    }
    case 'mcp': {
      const { createLogger } = await import('./infra/log.js');
      const { runStdio, startHttp } = await import('./mcp/run.js');
      // stdout carries the MCP protocol: logs go to stderr.
      const log = createLogger(config.logLevel, process.stderr);
      const bridgeToken = config.bridgeToken ?? (await savedSandboxToken(config));
      if (bridgeToken === undefined) {
        // Name the file looked in: a relative HERALD_DATA_DIR is read from where herald mcp was started.
        console.error(`herald: MCP_BRIDGE_TOKEN is not set, and no sandbox token was found in ${path.resolve(sandboxTokensFile(config))} (HERALD_DATA_DIR; \`npm start\` writes it there in sandbox mode)`);
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
      const { registerCommands } = await import('./platforms/discord/gateway-client.js');
      const { allCommands } = await import('./modules/modules.js');
      const commands = await allCommands();
      const register = (token: string, definitions: typeof commands[number]['definition'][], what?: string) =>
        registerCommands(token, discord.apiUrl, definitions).catch((err: unknown) => {
          const status = typeof err === 'object' && err !== null ? (err as { status?: unknown }).status : undefined;
          throw status === 401 ? discordTokenRejected(status, err, what) : err;
        });
      const names = await register(discord.token, commands.map((c) => c.definition));
      console.log(`registered: ${names.map((n) => `/${n}`).join(', ')}`);
      // Each other bot (HERALD_DISCORD_IDENTITIES) gets the commands every bot has (`/agent`), as its
      // session registers them at each connection.
      const everyBot = commands.filter((c) => c.everyBot === true).map((c) => c.definition);
      for (const identity of discord.identities) {
        if (identity.token === undefined || everyBot.length === 0) continue;
        const theirs = await register(identity.token, everyBot, `the token of identity ${identity.name} (HERALD_DISCORD_IDENTITIES)`);
        console.log(`registered as ${identity.name}: ${theirs.map((n) => `/${n}`).join(', ')}`);
      }
      return 0;
    }
    case 'serve':
    case 'dispatch': {
      // Tokens the operator supplied are theirs: the banner shows only the ones Herald made up.
      const supplied = { bridge: config.bridgeToken !== undefined, admin: config.adminToken !== undefined };
      let sandboxes: Sandboxes | undefined;
      const sandboxMode = isSandboxMode(config);
      if (sandboxMode && command !== 'serve') {
        console.error(`herald: ${sandboxReason()}: \`herald dispatch\` needs the bot token (sandbox mode runs everything in one \`herald serve\`)`);
        return 2;
      }
      // What the operator must fix stops start-up before anything slow starts (the platforms, the
      // store, the sandboxes), naming the variable to change: every port, then the data folder.
      await checkPortsFree([
        ...(command === 'serve' ? [{ host: config.host, port: config.port, variable: 'PORT' }] : []),
        ...(sandboxMode ? [{ host: config.host, port: config.sandboxPort, variable: 'HERALD_SANDBOX_PORT' }] : []),
        ...(config.metricsPort !== undefined ? [{ host: config.metricsHost, port: config.metricsPort, variable: 'HERALD_METRICS_PORT' }] : []),
      ]);
      // Sandbox mode keeps its tokens and its sandboxes' worlds there even beside PostgreSQL.
      if (config.databaseUrl === undefined || sandboxMode) await checkDataDir(config.dataDir, config.databaseUrl === undefined);
      const { createLogger } = await import('./infra/log.js');
      const log = createLogger(config.logLevel);
      if (sandboxMode) {
        config = await withSandboxTokens(config);
        // Every platform left to its sandbox gets one, started through its plugin's hook; Herald
        // is given their settings as if they were the platforms themselves.
        sandboxes = await startSandboxes(config);
        config = sandboxes.config;
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
        herald = await startHerald({ config, log, roles: { http: command === 'serve', dispatcher: true }, ...sandboxes?.site });
      } catch (err) {
        await sandboxes?.close();
        throw err;
      }
      await sandboxes?.attach(herald);
      // Listening for the stop before saying it is up: whoever reads the line may signal at once.
      const stopped = waitForSignal();
      // The banner comes last, below the start-up log lines: the links (a gateway, a chat connection)
      // log as they connect, so it waits for them a little (not for one another replica holds).
      if (command === 'serve') await linksSettled(herald.registry, BANNER_WAIT_MS);
      log.info({ url: herald.url, sandbox: sandboxes?.started[0]?.sandbox.url, metrics: herald.metricsUrl, store: herald.store.kind, role: command }, 'herald started');
      if (command === 'serve') {
        // The log is written asynchronously: what it holds goes out first, then the banner.
        await new Promise<void>((resolve) => log.flush(() => resolve()));
        printBanner(config, herald, supplied, sandboxes);
      }
      await stopped;
      log.info('stopping: no new claims; finishing in-flight deliveries');
      await herald.close();
      await sandboxes?.close();
      log.info('stopped');
      return 0;
    }
  }
}

/** At most this long for the links to connect before the banner is printed anyway. */
const BANNER_WAIT_MS = 5_000;

/** Until every link this process holds is up, or `ms` passed (a link down stays down in the status page). */
async function linksSettled(registry: Herald['registry'], ms: number): Promise<void> {
  const { linkStates } = await import('./infra/http/status-overview.js');
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const states = [...(await linkStates(registry)).values()].join(', ');
    if (!/\bdown\b|held by another replica/.test(states)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The request_id of the banner's "Try it" post. */
const BANNER_REQUEST_ID = 'f'.repeat(64);

function printBanner(config: Config, herald: Herald, supplied: { bridge: boolean; admin: boolean }, sandboxes: Sandboxes | undefined): void {
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
  // Each sandbox's page, what it is for, and what is in it.
  for (const { name, sandbox: s } of sandboxes?.started ?? []) {
    lines.push(place(`${name[0]?.toUpperCase() ?? ''}${name.slice(1)} sandbox`, `${s.page ?? s.url}${s.remark !== undefined ? `  (${s.remark})` : ''}`), ...(s.notes ?? []).map((n) => `${' '.repeat(19)}${n}`));
  }
  // What is off needs a variable and a restart: say which, so nobody looks for a switch.
  lines.push('', 'What is on (each is turned on by its variable and a restart):', ...capabilityLines(capabilities(config)));
  if (sandboxes !== undefined) {
    const tryIt = sandboxes.started.map((s) => s.sandbox.tryIt).find((t) => t !== undefined);
    lines.push(
      '',
      `For another shell (sandbox mode; tokens kept in ${sandboxTokensFile(config)}):`,
      ...placeExports(herald.url, herald.metricsUrl, sandboxes.started),
      token('MCP_BRIDGE_TOKEN', config.bridgeToken, supplied.bridge),
      token('HERALD_ADMIN_TOKEN', config.adminToken, supplied.admin),
      ...(tryIt !== undefined
        ? [
            '',
            'Try it:',
            `  curl -X PUT -H "Authorization: Bearer $HERALD_ADMIN_TOKEN" -d '{"channel_id":"${tryIt.channelId}"}' ${herald.url}/admin/destinations/${tryIt.guildId}/alerts`,
            // An id no other example uses (README, Swagger): the same id with another body would be refused (422).
            `  curl -H "Authorization: Bearer $MCP_BRIDGE_TOKEN" -d '{"request_id":"${BANNER_REQUEST_ID}","kind":"post","target":{"guild_id":"${tryIt.guildId}","destination":"alerts"},"body":{"content":"hello"}}' ${herald.url}/mcp/deliveries`,
            `  curl -H "Authorization: Bearer $MCP_BRIDGE_TOKEN" ${herald.url}/mcp/deliveries/${BANNER_REQUEST_ID}`,
          ]
        : []),
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
