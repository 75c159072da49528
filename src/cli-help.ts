import { readFile } from 'node:fs/promises';

// What `herald --help`, `herald <command> --help` and `herald --version` print, and how the
// command line is read. Nothing here starts anything or reads the configuration.

export const COMMANDS = ['serve', 'dispatch', 'migrate', 'mcp', 'commands'] as const;
export type CommandName = (typeof COMMANDS)[number];

export const USAGE = `usage: herald [command] [options]

commands:
  serve      serve the API and dispatch deliveries (the default; npm start runs it)
  dispatch   dispatch deliveries only (run several against one DATABASE_URL to scale out)
  migrate    apply database migrations and exit
  mcp [--http]
             the MCP server for agents: stdio by default, or Streamable HTTP at
             http://HOST:HERALD_MCP_PORT/mcp (bearer HERALD_MCP_TOKEN)
  commands register
             register Herald's slash commands with Discord
             (serve also does this when it connects to the gateway)

options:
  -h, --help     this help; \`herald <command> --help\` describes one command
  -v, --version  print Herald's version

Configuration comes from the environment; docs/guides/configuration.md lists every variable.`;

const HELP_OPTION = '  -h, --help   show this help and start nothing';

/** One command's help: what it does, its options, and the variables that matter most to it. */
export const COMMAND_HELP: Readonly<Record<CommandName, string>> = {
  serve: `usage: herald serve

Serve the API (/mcp/, /admin/, /docs, /ui/archive), dispatch deliveries, and answer slash commands
through Discord's gateway, until SIGTERM or Ctrl-C stops it gracefully. Without DISCORD_TOKEN it
runs a local Discord sandbox and makes up the tokens it needs (kept in HERALD_DATA_DIR).

options:
${HELP_OPTION}

environment (docs/guides/configuration.md lists every variable):
  PORT                  the API's port (8787)
  HOST                  the interface to listen on (127.0.0.1)
  HERALD_SANDBOX_PORT   the sandbox's port, without DISCORD_TOKEN (PORT+1)
  HERALD_METRICS_PORT   /metrics and the status page (PORT+2; off: none)
  DATABASE_URL          PostgreSQL (unset: embedded PGlite in HERALD_DATA_DIR)
  HERALD_DATA_DIR       PGlite's files and the sandbox's state (./data)
  DISCORD_TOKEN         the bot token (unset: sandbox mode)
  MCP_BRIDGE_TOKEN      bearer token of /mcp/ (sandbox mode makes one up)
  HERALD_ADMIN_TOKEN    bearer token of /admin/ (sandbox mode makes one up)`,

  dispatch: `usage: herald dispatch

Dispatch deliveries only: claim them from the database and send them to Discord, with no API and
no gateway. Run several against one PostgreSQL (DATABASE_URL) to scale out; each needs the bot
token. SIGTERM or Ctrl-C stops it gracefully.

options:
${HELP_OPTION}

environment (docs/guides/configuration.md lists every variable):
  DISCORD_TOKEN                 the bot token (required)
  DATABASE_URL                  the PostgreSQL database the serve processes use
  HERALD_METRICS_PORT           /metrics and the status page (PORT+2; off: none); one per process on a host
  HERALD_DISPATCH_CONCURRENCY   deliveries this process sends at once (8)
  HERALD_SHUTDOWN_GRACE_MS      how long in-flight deliveries may finish when stopping (10000)`,

  migrate: `usage: herald migrate

Apply the database migrations not applied yet, then exit (serve and dispatch also apply them at
start). Safe to run from several processes at once.

options:
${HELP_OPTION}

environment (docs/guides/configuration.md lists every variable):
  DATABASE_URL                   PostgreSQL (unset: embedded PGlite in HERALD_DATA_DIR)
  HERALD_DATA_DIR                PGlite's files (./data)
  HERALD_DB_STARTUP_TIMEOUT_MS   how long to wait for a PostgreSQL that cannot be reached (60000)`,

  mcp: `usage: herald mcp [--http]

The MCP server for agents: Herald's protocol as MCP tools, calling a running Herald over HTTP.
Over stdio by default (an MCP client starts it; stdout carries the protocol, logs go to stderr).

options:
  --http       serve Streamable HTTP at http://HOST:HERALD_MCP_PORT/mcp instead, behind the
               bearer token HERALD_MCP_TOKEN, until SIGTERM or Ctrl-C
${HELP_OPTION}

environment (docs/guides/configuration.md lists every variable; each one herald mcp reads is here):
  HERALD_URL                   the Herald it calls (http://127.0.0.1:PORT, PORT 8787)
  MCP_BRIDGE_TOKEN             Herald's bridge token (sandbox mode: read from HERALD_DATA_DIR)
  HERALD_DATA_DIR              where sandbox mode keeps that token (./data)
  HERALD_ADMIN_TOKEN           optional: the media archive's admin tools
  HERALD_MCP_WAIT_MS           how long a sending tool waits for delivered or failed (15000)
  HERALD_MCP_STATE             an older herald mcp's records file, imported once (HERALD_DATA_DIR/mcp-state.json)
  HERALD_MCP_INBOX_NOTIFY      on: a notifications/message for each new inbox event (off)
  HERALD_POLICY                the operator's policy file (YAML): what clients may do (no rules)
  LOG_LEVEL                    its log's level; the log goes to stderr (info)
 --http only:
  HOST                         the interface to listen on (127.0.0.1)
  HERALD_MCP_PORT              the port (8790)
  HERALD_MCP_TOKEN             the bearer token clients present (required)
  HERALD_MCP_ALLOWED_ORIGINS   browser origins accepted besides loopback ones (comma-separated)
  HERALD_MCP_FILES_DIR         the folder {path} attachments may come from (unset: none)
  HERALD_MCP_OAUTH_ISSUER      an authorization server whose access tokens are accepted too
  HERALD_MCP_OAUTH_JWKS_URL    its signing keys (ISSUER/.well-known/jwks.json)
  HERALD_MCP_RESOURCE          this server's canonical URL, the tokens' audience (the URL served)`,

  commands: `usage: herald commands register

Register Herald's slash commands (/agent, /destinations, …) with Discord, then exit; and, for each
other bot of HERALD_DISCORD_IDENTITIES, the commands every bot has (/agent) with its own token.
serve also does this when it connects to the gateway; sandbox mode registers them itself at start-up.

options:
${HELP_OPTION}

environment (docs/guides/configuration.md lists every variable):
  DISCORD_TOKEN     the bot token (required)
  DISCORD_API_URL   Discord's REST API (Discord's own)
  HERALD_DISCORD_IDENTITIES
                    Herald's other bots, each name=env:VARIABLE or name=file:/path (its token)`,
};

/** What the command line asks for (a usage error's message is printed as it is). */
export type Invocation =
  | { kind: 'help'; text: string }
  | { kind: 'version' }
  | { kind: 'run'; command: CommandName; http: boolean }
  | { kind: 'usage-error'; message: string };

const isHelp = (arg: string): boolean => arg === '--help' || arg === '-h';

/**
 * Read the command line. `--help` anywhere after a command answers that command's help, so a
 * command asked for its help never starts; anything a command does not take is refused (its
 * settings come from the environment, not from flags).
 */
export function parseArgs(argv: readonly string[]): Invocation {
  const [first, ...rest] = argv;
  if (first === undefined) return { kind: 'run', command: 'serve', http: false };
  if (isHelp(first) || first === 'help') {
    const topic = rest[0];
    return { kind: 'help', text: topic !== undefined && isCommand(topic) ? COMMAND_HELP[topic] : USAGE };
  }
  if (first === '--version' || first === '-v' || first === 'version') return { kind: 'version' };
  if (!isCommand(first)) return { kind: 'usage-error', message: `herald: unknown command ${JSON.stringify(first)}\n\n${USAGE}` };
  const command = first;
  if (rest.some(isHelp)) return { kind: 'help', text: COMMAND_HELP[command] };
  const expected = command === 'mcp' ? ['--http'] : command === 'commands' ? ['register'] : [];
  if (command === 'commands' && rest[0] !== 'register') {
    return { kind: 'usage-error', message: `herald commands: say what to do: herald commands register (herald commands --help)` };
  }
  const unexpected = rest.find((arg, i) => !expected.includes(arg) || rest.indexOf(arg) !== i);
  if (unexpected !== undefined) {
    return {
      kind: 'usage-error',
      message: `herald ${command}: unexpected ${JSON.stringify(unexpected)}: settings come from the environment (see herald ${command} --help)`,
    };
  }
  return { kind: 'run', command, http: rest.includes('--http') };
}

function isCommand(name: string): name is CommandName {
  return (COMMANDS as readonly string[]).includes(name);
}

/** The version in Herald's package.json (one folder up from src/, two from dist/src/). */
export async function packageVersion(): Promise<string> {
  for (const relative of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(await readFile(new URL(relative, import.meta.url), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'herald' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // Not this folder: try the next.
    }
  }
  return 'unknown';
}
