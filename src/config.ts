import path from 'node:path';
import { EnvReader, STRONG_TOKEN, type Env } from './platform/env.js';
import { TRANSPORTS, TRANSPORT_NAMES } from './transports/registry.js';

export { STRONG_TOKEN };

/** Herald's configuration, parsed once at start-up from the environment. */
export interface Config {
  /** `PORT`: HTTP port of the API, `/docs` and the probes. Default 8787. */
  readonly port: number;
  /** `HOST`: interface to listen on. Default 127.0.0.1 (loopback only). */
  readonly host: string;
  /** `MCP_BRIDGE_TOKEN`: bearer token of the `/mcp/` protocol; unset → every `/mcp/` request gets 503. */
  readonly bridgeToken: string | undefined;
  /** `HERALD_ADMIN_TOKEN`: bearer token of the `/admin/` endpoints; unset → they answer 503. */
  readonly adminToken: string | undefined;
  /** `DATABASE_URL`: a PostgreSQL URL. Unset → embedded PGlite in `dataDir`. */
  readonly databaseUrl: string | undefined;
  /** `HERALD_DATA_DIR`: where PGlite and sandbox-mode tokens live. Default `./data`. */
  readonly dataDir: string;
  /**
   * `HERALD_DB_STARTUP_TIMEOUT_MS`: at start-up, how long to keep retrying while PostgreSQL cannot
   * be reached (down, starting up, in recovery) before exiting. Default 60 s; 0 tries once.
   */
  readonly dbStartupTimeoutMs: number;
  /**
   * `HERALD_DB_POOL_SIZE`: PostgreSQL connections one process may hold (the API's accepts share
   * statements through group commit, so few suffice). Default 16.
   */
  readonly dbPoolSize: number;
  /** `HERALD_SANDBOX_PORT`: port of the built-in sandbox in sandbox mode. Default PORT+1; 0 picks a free one. */
  readonly sandboxPort: number;
  /**
   * `HERALD_METRICS_PORT`: port of `/metrics` (Prometheus) and the operator status page, apart from
   * the API so scrapes never compete with requests and need no token. Default PORT+2 (8789; 0 when
   * PORT is 0: a free port); `off` serves no metrics. Each process on one host needs its own.
   */
  readonly metricsPort: number | undefined;
  /** `HERALD_METRICS_HOST`: interface of the metrics port. Default 127.0.0.1 (loopback only). */
  readonly metricsHost: string;
  /** `LOG_LEVEL`: pino level. Default info. */
  readonly logLevel: string;
  /** `HERALD_LEASE_MS`: how long a claimed delivery belongs to its dispatcher before it counts as unknown. */
  readonly leaseMs: number;
  /**
   * `HERALD_SINGLETON_TTL_MS`: the lease of a connection only one process holds (Discord's gateway,
   * the IRC observer) lasts this long from its last renewal; renewed every fifth of it, given up by
   * a holder that could not renew for half of it. Another process takes over at most about this
   * long plus a fifth after the holder dies. Default 8 s.
   */
  readonly singletonTtlMs: number;
  /** `HERALD_POLL_MS`: dispatcher polling interval (LISTEN/NOTIFY wakes it sooner). */
  readonly pollMs: number;
  /**
   * `HERALD_NONCE_WINDOW_MS`: how long after an attempt began Herald trusts Discord's nonce to
   * deduplicate a resend; older in-doubt deliveries are reconciled against channel history first.
   * Discord documents only "the past few minutes"; the default, 1 minute, leaves a wide margin.
   * A resend relying on it is held to it when the request leaves, not when the attempt starts.
   */
  readonly nonceWindowMs: number;
  /** `HERALD_MAX_ATTEMPTS`: attempts before a delivery that keeps failing transiently fails UPSTREAM_UNAVAILABLE. */
  readonly maxAttempts: number;
  /** `HERALD_RETRY_BASE_MS`: first retry delay; doubles per attempt, full jitter, capped at 5 minutes. */
  readonly retryBaseMs: number;
  /** `HERALD_DISPATCH_CONCURRENCY`: deliveries one process sends at once. */
  readonly dispatchConcurrency: number;
  /**
   * `HERALD_CLAIM_SWEEP_MS`: under a backlog a dispatcher claims past the deliveries it already
   * claimed, and looks at every due one only this often (and whenever the backlog runs out), so a
   * long transaction holding back vacuum does not slow every claim; a delivery due below that point
   * (a late commit) or a lapsed lease waits at most this long. 0: every claim looks at every due
   * delivery. Default 5 s.
   */
  readonly claimSweepMs: number;
  /** `HERALD_SHUTDOWN_GRACE_MS`: on SIGTERM, how long in-flight deliveries may finish before they are released. */
  readonly shutdownGraceMs: number;
  /**
   * `HERALD_DISABLED_KINDS`: comma-separated kinds this bridge refuses (`dm`, `edit`). Capabilities
   * report them false, and such requests fail CAPABILITY_UNAVAILABLE at once.
   */
  readonly disabledKinds: readonly ('dm' | 'edit')[];
  /** `HERALD_URL`: the bridge `herald mcp` talks to. Default http://127.0.0.1:PORT. */
  readonly heraldUrl: string;
  /** `HERALD_MCP_STATE`: where `herald mcp` keeps its pairing and edit counters. Default HERALD_DATA_DIR/mcp-state.json. */
  readonly mcpStatePath: string;
  /**
   * `HERALD_MCP_WAIT_MS`: how long a sending tool waits for delivered/failed before answering with the
   * request_id; `herald mcp` also rides out a restart of the bridge this long (at least 30 s). A
   * bridge it has not reached yet, or found down last time, it reports after 2 s instead.
   */
  readonly mcpWaitMs: number;
  /** `HERALD_MCP_PORT`: port of `herald mcp --http` (Streamable HTTP). Default 8790. */
  readonly mcpPort: number;
  /** `HERALD_MCP_TOKEN`: bearer token clients of `herald mcp --http` must present (required for --http). */
  readonly mcpToken: string | undefined;
  /** `HERALD_MCP_ALLOWED_ORIGINS`: browser origins `herald mcp --http` accepts besides loopback ones (comma-separated); any other Origin gets 403. */
  readonly mcpAllowedOrigins: readonly string[];
  /**
   * `HERALD_MCP_INBOX_NOTIFY`: `on` makes `herald mcp` send a `notifications/message` (logger
   * `herald.inbox`) for each new inbox event while a session lasts (stdio, HTTP+SSE), for clients
   * that act on notifications. Default off.
   */
  readonly mcpInboxNotify: boolean;
  /** `HERALD_MCP_OAUTH_ISSUER`: the authorization server whose access tokens `herald mcp --http` also accepts (OAuth mode); unset: the static token only. */
  readonly mcpOAuthIssuer: string | undefined;
  /** `HERALD_MCP_OAUTH_JWKS_URL`: where the issuer publishes its signing keys. Default ISSUER/.well-known/jwks.json. */
  readonly mcpOAuthJwksUrl: string | undefined;
  /** `HERALD_MCP_RESOURCE`: this MCP server's canonical URL, the audience its access tokens must name (RFC 8707). Default the URL it serves /mcp at. */
  readonly mcpResource: string | undefined;
  /** `HERALD_MCP_FILES_DIR`: the folder `herald mcp --http` may attach `{path}` files from (only inside it); unset: none over HTTP (stdio reads any). */
  readonly mcpFilesDir: string | undefined;
  /** `HERALD_POLICY`: the operator's policy file (YAML): what connectors and OAuth clients may do. Unset: no rules. */
  readonly policyPath: string | undefined;
  /** `run_command`'s switch and limits (seed 001's defaults). */
  readonly commands: CommandLimits;
  /** Bot-to-bot handoffs (seed 002): who may hand off to whom, and the limits. */
  readonly handoffs: HandoffLimits;
  /** The media archive's storage limit and download cap. */
  readonly media: MediaLimits;
  /** Files out and in (uploads, attachments fetched for agents). */
  readonly files: FileStoreLimits;
  /** The inbound inbox's retention and its operator's webhook. */
  readonly inbox: InboxSettings;
  /**
   * `HERALD_TRANSPORT`: the platform Herald is home on, where people's identities live and DMs
   * go (a name of src/transports/registry.ts). Default discord; `memory` runs on a platform held
   * in memory, for smoke tests with nothing outside the process.
   */
  readonly transport: string;
  /**
   * `HERALD_CHAT_TRANSPORT`: the platform the chat tools use when a call names none (a name of
   * src/transports/registry.ts). Default irc when HERALD_IRC_URL is set, else HERALD_TRANSPORT.
   */
  readonly chatTransport: string;
  /**
   * Each platform's own settings, read by its folder (src/transports/<name>/index.ts), by name;
   * a platform that is not configured has none and is not started.
   */
  readonly platforms: Readonly<Record<string, unknown>>;
  /**
   * Sandbox mode (no DISCORD_TOKEN): the platforms without settings of their own that have a
   * sandbox (src/transports/plugin.ts), started locally beside the Discord one.
   */
  readonly sandboxed: readonly string[];
}

export interface InboxSettings {
  /** `HERALD_INBOX_RETENTION_DAYS`: heard events older than this are dropped. Default 30. */
  readonly retentionDays: number;
  /** `HERALD_INBOX_MAX_PER_CHANNEL`: at most this many heard events kept per channel (the oldest dropped first). Default 10000. */
  readonly maxPerChannel: number;
  /** `HERALD_INBOX_WEBHOOK_URL`: where each heard event is POSTed, signed (operator only; unset: no push). */
  readonly webhookUrl: string | undefined;
  /** `HERALD_INBOX_WEBHOOK_SECRET`: the HMAC-SHA256 key the pushes are signed with (at least 43 base64url characters; required with the URL). */
  readonly webhookSecret: string | undefined;
  /** `HERALD_INBOX_WEBHOOK_GIVE_UP_SECONDS`: a push still failing this long after the event was heard is given up (the event stays in the inbox). Default 86400. */
  readonly webhookGiveUpSeconds: number;
}

export interface HandoffLimits {
  /**
   * `HERALD_TRUSTED_BOT_IDS`: comma-separated bot user ids this bot accepts handoffs from and may
   * hand off to. Empty (the default): handoffs are off, both ways.
   */
  readonly trustedBotIds: readonly string[];
  /** `HERALD_HANDOFF_TTL_SECONDS`: a sent envelope's lifetime (`expires_at` = now + this; a request may ask for less). Default 300, at most 3600. */
  readonly ttlSeconds: number;
  /** `HERALD_HANDOFF_MAX_EXPIRY_SECONDS`: a received envelope expiring later than now + this is refused. Default 3600. */
  readonly maxExpirySeconds: number;
  /** `HERALD_HANDOFF_MAX_PAYLOAD_BYTES`: largest received payload text, UTF-8 bytes. Default 100000. */
  readonly maxPayloadBytes: number;
  /** `HERALD_HANDOFF_REPLAY_CAPACITY`: live replay entries at most; when full, new handoffs are refused (fail closed). Default 4096. */
  readonly replayCapacity: number;
  /** `HERALD_HANDOFF_RATE_LIMIT`: accepted handoffs per source bot per window. Default 10. */
  readonly rateLimit: number;
  /** `HERALD_HANDOFF_RATE_WINDOW_SECONDS`: the rate limit's window. Default 60. */
  readonly rateWindowSeconds: number;
}

export interface MediaLimits {
  /** `HERALD_MEDIA_LIMIT_BYTES`: bytes the archive may store under HERALD_DATA_DIR/media. Default 10 GiB. */
  readonly limitBytes: number;
  /** `HERALD_MEDIA_WARN_PERCENT`: from this share of the limit, a new scrape needs `confirm: true`. Default 80. */
  readonly warnPercent: number;
  /** `HERALD_MEDIA_OVERRUN_PERCENT`: at this share of the limit, running download scrapes pause. Default 100. */
  readonly overrunPercent: number;
  /** `HERALD_MEDIA_MAX_FILE_BYTES`: largest single file a download scrape stores. Default 50 MiB. */
  readonly maxFileBytes: number;
}

export interface FileStoreLimits {
  /** `HERALD_FILE_MAX_BYTES`: largest file `POST /mcp/files` stores (and an attachment fetched for an agent). Default 25 MiB. */
  readonly maxBytes: number;
  /** `HERALD_FILE_TTL_HOURS`: hours after its last use that a file no delivery lists is deleted. Default 24. */
  readonly ttlHours: number;
}

export interface CommandLimits {
  /** `HERALD_COMMAND_EXECUTION_ENABLED`: `true` lets `run_command` execute; otherwise it only validates. Default false. */
  readonly executionEnabled: boolean;
  /** `HERALD_COMMAND_TIMEOUT_MS`: how long a run waits for its command; a later one still finishes and is stored. Default 45 s. */
  readonly timeoutMs: number;
  /** `HERALD_COMMAND_CONCURRENCY`: commands one process executes at once (a timed-out one keeps its slot). Default 4. */
  readonly concurrency: number;
  /** `HERALD_COMMAND_MAX_LENGTH`: longest command text (and messageContent). Default 2000. */
  readonly maxLength: number;
  /** `HERALD_COMMAND_MAX_OUTPUTS`: captured outputs kept per run. Default 100. */
  readonly maxOutputs: number;
  /** `HERALD_COMMAND_MAX_OUTPUT_BYTES`: captured output bytes kept per run. Default 2 MiB. */
  readonly maxOutputBytes: number;
  /** `HERALD_COMMAND_IDEMPOTENCY_MINUTES`: how long an execute's result is replayed for its key. Default 10. */
  readonly idempotencyMinutes: number;
  /**
   * `HERALD_COMMAND_SOURCE_MAX_AGE_SECONDS`: how old an execute's source message (the user's own
   * message asking for it) may be, by Discord's timestamp against Herald's clock; older ones are
   * refused. A message is consent to one command, given now, not a standing permission. Default
   * 300 (5 minutes), at most `COMMAND_SOURCE_MAX_AGE_LIMIT_SECONDS`.
   */
  readonly sourceMaxAgeSeconds: number;
}

/** The longest source-message window an operator may set; claimed messages are kept this long. */
export const COMMAND_SOURCE_MAX_AGE_LIMIT_SECONDS = 3_600;

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parse the environment, each platform's variables by its own folder; reports every problem at once. */
export function loadConfig(env: Env = process.env): Config {
  const read = new EnvReader(env);
  const text = (name: string): string | undefined => read.text(name);
  const int = (name: string, fallback: number, min: number, max: number): number => read.int(name, fallback, min, max);
  const kinds = (): ('dm' | 'edit')[] => {
    const list = read.list('HERALD_DISABLED_KINDS');
    const bad = list.filter((k) => k !== 'dm' && k !== 'edit');
    if (bad.length > 0) read.problem(`HERALD_DISABLED_KINDS may list only dm and edit (got ${bad.join(', ')})`);
    return list.filter((k): k is 'dm' | 'edit' => k === 'dm' || k === 'edit');
  };
  const botIds = (): string[] => {
    const list = read.list('HERALD_TRUSTED_BOT_IDS');
    const bad = list.filter((k) => !/^[1-9][0-9]{16,19}$/.test(k));
    if (bad.length > 0) read.problem(`HERALD_TRUSTED_BOT_IDS must be comma-separated Discord user ids (got ${bad.join(', ')})`);
    return [...new Set(list.filter((k) => /^[1-9][0-9]{16,19}$/.test(k)))];
  };
  const databaseUrl = text('DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) read.problem('DATABASE_URL must be a postgres:// or postgresql:// URL');
  const port = int('PORT', 8787, 0, 65535);
  const leaseMs = int('HERALD_LEASE_MS', 60_000, 500, 3_600_000);
  const transport = text('HERALD_TRANSPORT') ?? 'discord';
  const platforms: Record<string, unknown> = {};
  for (const t of TRANSPORTS) {
    const settings = t.config(read, { leaseMs, home: transport });
    if (settings !== undefined) platforms[t.name] = settings;
  }
  const chatTransport = text('HERALD_CHAT_TRANSPORT') ?? (platforms['irc'] !== undefined ? 'irc' : transport);
  // Without a Discord token Herald runs on sandboxes: every platform that has one and no settings.
  const noDiscordToken = (platforms['discord'] as { token?: string } | undefined)?.token === undefined;
  const sandboxed = noDiscordToken ? TRANSPORTS.filter((t) => t.sandbox !== undefined && platforms[t.name] === undefined).map((t) => t.name) : [];
  // Each names a platform of the registry that this environment configures.
  for (const [variable, name] of [['HERALD_TRANSPORT', transport], ['HERALD_CHAT_TRANSPORT', chatTransport]] as const) {
    if (!TRANSPORT_NAMES.includes(name)) read.problem(`${variable} must be one of ${TRANSPORT_NAMES.join(', ')}`);
    else if (platforms[name] === undefined && !sandboxed.includes(name)) read.problem(`${variable} is ${name} but ${TRANSPORTS.find((t) => t.name === name)?.off ?? 'it is off'}`);
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
    singletonTtlMs: int('HERALD_SINGLETON_TTL_MS', 8_000, 500, 600_000),
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
    commands: Object.freeze({
      executionEnabled: read.trueFalse('HERALD_COMMAND_EXECUTION_ENABLED', false),
      timeoutMs: int('HERALD_COMMAND_TIMEOUT_MS', 45_000, 100, 3_600_000),
      concurrency: int('HERALD_COMMAND_CONCURRENCY', 4, 1, 256),
      maxLength: int('HERALD_COMMAND_MAX_LENGTH', 2_000, 1, 4_000),
      maxOutputs: int('HERALD_COMMAND_MAX_OUTPUTS', 100, 1, 10_000),
      maxOutputBytes: int('HERALD_COMMAND_MAX_OUTPUT_BYTES', 2 * 1024 * 1024, 1, 64 * 1024 * 1024),
      idempotencyMinutes: int('HERALD_COMMAND_IDEMPOTENCY_MINUTES', 10, 1, 7 * 24 * 60),
      sourceMaxAgeSeconds: int('HERALD_COMMAND_SOURCE_MAX_AGE_SECONDS', 300, 1, COMMAND_SOURCE_MAX_AGE_LIMIT_SECONDS),
    }),
    handoffs: Object.freeze({
      trustedBotIds: Object.freeze(botIds()),
      ttlSeconds: int('HERALD_HANDOFF_TTL_SECONDS', 300, 1, 3_600),
      maxExpirySeconds: int('HERALD_HANDOFF_MAX_EXPIRY_SECONDS', 3_600, 1, 86_400),
      maxPayloadBytes: int('HERALD_HANDOFF_MAX_PAYLOAD_BYTES', 100_000, 1, 10_000_000),
      replayCapacity: int('HERALD_HANDOFF_REPLAY_CAPACITY', 4_096, 1, 1_000_000),
      rateLimit: int('HERALD_HANDOFF_RATE_LIMIT', 10, 1, 100_000),
      rateWindowSeconds: int('HERALD_HANDOFF_RATE_WINDOW_SECONDS', 60, 1, 86_400),
    }),
    inbox: Object.freeze({
      retentionDays: int('HERALD_INBOX_RETENTION_DAYS', 30, 1, 3_650),
      maxPerChannel: int('HERALD_INBOX_MAX_PER_CHANNEL', 10_000, 1, 10_000_000),
      webhookUrl: read.url('HERALD_INBOX_WEBHOOK_URL'),
      webhookSecret: read.token('HERALD_INBOX_WEBHOOK_SECRET'),
      webhookGiveUpSeconds: int('HERALD_INBOX_WEBHOOK_GIVE_UP_SECONDS', 86_400, 1, 30 * 86_400),
    }),
    media: Object.freeze({
      limitBytes: int('HERALD_MEDIA_LIMIT_BYTES', 10 * 1024 ** 3, 0, Number.MAX_SAFE_INTEGER),
      warnPercent: int('HERALD_MEDIA_WARN_PERCENT', 80, 1, 100),
      overrunPercent: int('HERALD_MEDIA_OVERRUN_PERCENT', 100, 1, 200),
      maxFileBytes: int('HERALD_MEDIA_MAX_FILE_BYTES', 50 * 1024 ** 2, 1, Number.MAX_SAFE_INTEGER),
    }),
    files: Object.freeze({
      maxBytes: int('HERALD_FILE_MAX_BYTES', 25 * 1024 ** 2, 1, Number.MAX_SAFE_INTEGER),
      ttlHours: int('HERALD_FILE_TTL_HOURS', 24, 1, 24 * 365),
    }),
    transport,
    chatTransport,
    platforms: Object.freeze(platforms),
    sandboxed: Object.freeze(sandboxed),
  };
  const levels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  if (!levels.includes(config.logLevel)) read.problem(`LOG_LEVEL must be one of ${levels.join(', ')}`);
  if ((config.inbox.webhookUrl === undefined) !== (config.inbox.webhookSecret === undefined)) read.problem('HERALD_INBOX_WEBHOOK_URL and HERALD_INBOX_WEBHOOK_SECRET go together: set both, or neither');
  if (config.media.warnPercent > config.media.overrunPercent) read.problem('HERALD_MEDIA_WARN_PERCENT must not be above HERALD_MEDIA_OVERRUN_PERCENT');
  if (read.problems.length > 0) throw new ConfigError(read.problems);
  return Object.freeze(config);
}

/** True when Herald uses its built-in Discord sandbox instead of a real bot. */
export function isSandboxMode(config: Config): boolean {
  const discord = config.platforms['discord'] as { token?: string } | undefined;
  return discord?.token === undefined && (config.transport === 'discord' || config.sandboxed.includes(config.transport));
}

/** Variables Herald reads outside loadConfig: the test harness's run folder (test/support/run-dir.ts). */
const READ_ELSEWHERE = ['HERALD_TEST_RUN_DIR'];

/** Herald's own prefixes: a variable with one of them that Herald does not read is most likely a typo. */
const PREFIXES = ['HERALD_', 'DISCORD_', 'MCP_'];

let known: readonly string[] | undefined;

/**
 * Every variable Herald reads. Not a second list to keep in step: loadConfig itself runs once on
 * an environment that turns every optional part on, and each name it asks for is recorded.
 */
export function knownVariables(): readonly string[] {
  if (known === undefined) {
    const read = new Set<string>(READ_ELSEWHERE);
    // Each platform reads all of its variables, configured or not.
    const probe: Env = {};
    loadConfig(
      new Proxy(probe, {
        get(target, name) {
          if (typeof name === 'string') read.add(name);
          return typeof name === 'string' ? target[name] : undefined;
        },
      }),
    );
    known = Object.freeze([...read].sort());
  }
  return known;
}

export interface UnknownVariable {
  readonly name: string;
  /** The known variable it most likely meant, when one is close enough to say so. */
  readonly suggestion: string | undefined;
}

/** Variables set with Herald's prefixes that Herald does not read (names only: values may be secrets). */
export function unknownVariables(env: Env = process.env): UnknownVariable[] {
  const names = knownVariables();
  return Object.keys(env)
    .filter((name) => PREFIXES.some((p) => name.startsWith(p)) && !names.includes(name))
    .sort()
    .map((name) => ({ name, suggestion: closest(name, names) }));
}

/**
 * The known name nearest to `name` (a prefix added to an unprefixed one counts too: HERALD_PORT →
 * PORT); between equally near ones, the one sharing the longest start (HERALD_MCP_WAIT → _WAIT_MS).
 */
function closest(name: string, names: readonly string[]): string | undefined {
  let best: { name: string; distance: number; shared: number } | undefined;
  for (const candidate of names) {
    const forms = PREFIXES.some((p) => candidate.startsWith(p)) ? [candidate] : [candidate, ...PREFIXES.map((p) => p + candidate)];
    const distance = Math.min(...forms.map((form) => editDistance(name, form)));
    let shared = 0;
    while (shared < name.length && name[shared] === candidate[shared]) shared++;
    if (best === undefined || distance < best.distance || (distance === best.distance && shared > best.shared)) best = { name: candidate, distance, shared };
  }
  return best !== undefined && best.distance <= Math.max(2, Math.floor(name.length / 4)) ? best.name : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  const at = (i: number, j: number): number => d[i]?.[j] ?? Infinity;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, at(i - 2, j - 2) + 1);
      (d[i] as number[])[j] = v;
    }
  }
  return at(a.length, b.length);
}
