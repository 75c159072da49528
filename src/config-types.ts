// What Herald's configuration holds, below every part that reads it: the modules, the platforms'
// wiring and `herald mcp` import this shape; src/config.ts reads it from the environment (and
// asks each platform and module to read its own).

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
  /**
   * `HERALD_LEASE_MS`: how long a claimed delivery belongs to its dispatcher before it counts as unknown.
   * Its requests leave only while it holds, less a margin (src/infra/faults/fence.ts).
   */
  readonly leaseMs: number;
  /**
   * `HERALD_SINGLETON_TTL_MS`: the lease of a connection only one process holds (Discord's gateway,
   * the IRC observer) lasts this long from its last renewal; renewed every fifth of it, given up by
   * a holder that could not renew for half of it. Another process takes over at most about this
   * long plus a fifth after the holder dies. Default 8 s.
   */
  readonly singletonTtlMs: number;
  /**
   * `HERALD_SINGLETON_DOWN_MS`: a holder whose connection (Discord's gateway, Slack's Socket Mode,
   * the IRC observer) has not been up for this long gives the lease up, so a replica that can reach
   * the platform takes it over, and bids again only after as long again. Default three TTLs (24 s).
   */
  readonly singletonDownMs: number;
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
  /** `HERALD_MCP_STATE`: a records file an older `herald mcp` wrote, imported into Herald's store once at start (the records are Herald's now: /mcp/records/). Default HERALD_DATA_DIR/mcp-state.json. */
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
  /**
   * Each module's own settings, read by its folder's `config` hook (src/modules/<name>/settings.ts),
   * by name; a module without the hook has none.
   */
  readonly modules: Readonly<Record<string, unknown>>;
  /**
   * `HERALD_TRANSPORT`: the platform Herald is home on, where people's identities live and DMs
   * go (a name of src/platforms/platforms.ts). Default discord; `memory` runs on a platform held
   * in memory, for smoke tests with nothing outside the process.
   */
  readonly transport: string;
  /**
   * `HERALD_CHAT_TRANSPORT`: the platform the chat tools use when a call names none (a name of
   * src/platforms/platforms.ts). Default irc when HERALD_IRC_URL is set, else HERALD_TRANSPORT.
   */
  readonly chatTransport: string;
  /**
   * Each platform's own settings, read by its folder (src/platforms/<name>/index.ts), by name;
   * a platform that is not configured has none and is not started.
   */
  readonly platforms: Readonly<Record<string, unknown>>;
  /**
   * The platforms left to their sandbox (src/platforms/sandboxes.ts): in sandbox mode (no
   * DISCORD_TOKEN) each is started locally and Herald is given its settings.
   */
  readonly sandboxed: readonly string[];
}

/**
 * `HERALD_FAULT_POINTS`: for the chaos campaign only, never in a deployment: `name=probability,…`
 * (before-send, after-answer, before-commit; `once`: the first pass only) makes a process stop itself
 * (SIGSTOP) there, to be continued by the campaign (src/infra/faults/fault-points.ts). Read where it
 * is used, not by loadConfig. Default: none.
 */
