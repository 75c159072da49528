import { errorSummary } from '../../infra/errors.js';
import { definePlatform } from '../plugin.js';
import { stateOf } from '../singleton-state.js';
import { tablesOf } from '../../infra/db/tables.js';
import type { IrcDb } from './irc-line.table.js';

/** IRC's settings. */
export interface IrcConfig {
  /** `HERALD_IRC_URL`: `irc://host:port` or `ircs://host:port` (TLS, certificate verified). */
  readonly url: string;
  /** `HERALD_IRC_NICK`: the observer's nick, Herald's own name on the network. Default herald. */
  readonly nick: string;
  /** `HERALD_IRC_PASSWORD`: SASL PLAIN password of the account named like HERALD_IRC_NICK (optional). */
  readonly password: string | undefined;
  /** `HERALD_IRC_CHANNELS`: comma-separated channels the observer joins at start (besides those created through Herald). */
  readonly channels: readonly string[];
  /** `HERALD_IRC_LINES_PER_SECOND`: flood limit per connection, after a burst of 5. Default 4. */
  readonly linesPerSecond: number;
  /** `HERALD_IRC_ECHO_TIMEOUT_MS`: how long a line waits for the server's labeled echo. Default 10 s. */
  readonly echoTimeoutMs: number;
  /** `HERALD_IRC_SENDER_IDLE_MS`: an agent's connection unused this long is closed. Default 5 minutes. */
  readonly senderIdleMs: number;
  /** `HERALD_IRC_RETENTION_DAYS`: lines read are kept this long. Default 8. */
  readonly retentionDays: number;
  /** `HERALD_IRC_RETENTION_LINES`: and at most this many per channel. Default 10000. */
  readonly retentionLines: number;
}

/** IRC beside (or instead of) Discord, when HERALD_IRC_URL is set: its observer reads its channels into the store. */
export const irc = definePlatform<IrcConfig>({
  name: 'irc',
  off: 'HERALD_IRC_URL is unset',
  config(env) {
    const url = env.text('HERALD_IRC_URL');
    if (url !== undefined && !/^ircs?:\/\/[^/\s:]+(:[0-9]{1,5})?\/?$/.test(url)) env.problem('HERALD_IRC_URL must be irc://host:port or ircs://host:port');
    const nick = env.text('HERALD_IRC_NICK') ?? 'herald';
    if (!/^[A-Za-z[\]\\`_^{|}][A-Za-z0-9[\]\\`_^{|}-]{0,29}$/.test(nick)) env.problem('HERALD_IRC_NICK must be an IRC nick (a letter or []\\`_^{|} first, at most 30 characters)');
    const channels = env.list('HERALD_IRC_CHANNELS');
    for (const c of channels) if (!/^[#&]?[^\s,:]{1,49}$/.test(c)) env.problem(`HERALD_IRC_CHANNELS: ${JSON.stringify(c)} is not a channel name`);
    // Every variable is read (and checked) even when IRC is off: then a typo in one is still reported.
    const settings = {
      nick,
      password: env.text('HERALD_IRC_PASSWORD'),
      channels: Object.freeze(channels),
      linesPerSecond: env.int('HERALD_IRC_LINES_PER_SECOND', 4, 1, 1000),
      echoTimeoutMs: env.int('HERALD_IRC_ECHO_TIMEOUT_MS', 10_000, 100, 600_000),
      senderIdleMs: env.int('HERALD_IRC_SENDER_IDLE_MS', 300_000, 1_000, 86_400_000),
      retentionDays: env.int('HERALD_IRC_RETENTION_DAYS', 8, 1, 3650),
      retentionLines: env.int('HERALD_IRC_RETENTION_LINES', 10_000, 100, 10_000_000),
    };
    return url === undefined ? undefined : Object.freeze({ url, ...settings });
  },

  async start(config, services) {
    // Loaded only when configured: irc-framework stays out of a start-up without IRC.
    const { parseIrcUrl } = await import('./irc-connection.js');
    const { IrcMetrics, IrcPlatform } = await import('./irc-platform.js');
    const server = parseIrcUrl(config.url);
    if (server === undefined) throw new Error('HERALD_IRC_URL must be irc://host:port or ircs://host:port');
    const transport = new IrcPlatform({
      server,
      nick: config.nick,
      saslPassword: config.password,
      channels: config.channels,
      // IRC keeps the lines it reads in tables of its own (irc-line.table.ts).
      db: tablesOf<IrcDb>(services.db),
      log: services.log.child({ transport: 'irc' }),
      metrics: new IrcMetrics(services.registry),
      linesPerSecond: config.linesPerSecond,
      echoTimeoutMs: config.echoTimeoutMs,
      senderIdleMs: config.senderIdleMs,
      retention: { maxAgeMs: config.retentionDays * 24 * 60 * 60 * 1000, perChannel: config.retentionLines },
      // Like Discord's gateway nonces: which line a send's key created, for reconciliation.
      onOwnLine: (key, channel, msgid, at) => services.ownMessage(key, channel, msgid, at),
    });

    services.log.info({ host: server.host, port: server.port, tls: server.tls, nick: config.nick }, 'connecting to IRC');
    transport.start();
    // One replica holds every IRC connection (the observer and agents' nicks), under the lease
    // `irc:observer`: a channel shows one observer, a nick is connected once, and the holder's
    // dispatcher sends every IRC line (others put such jobs back untried: irc-platform.ts).
    let joined: Promise<void> | undefined;
    let turns: Promise<void> = Promise.resolve();
    let stopping: Promise<void> = Promise.resolve();
    const inTurn = (step: () => Promise<void>): void => {
      turns = turns.then(step).catch((err: unknown) => services.log.warn({ err: errorSummary(err) }, 'IRC handover step failed'));
    };
    // A process that runs no jobs could not send on them: it never takes the lease, only watches it.
    const lease = services.singleton(
      'irc:observer',
      services.dispatching
        ? {
            onAcquired: () => {
              services.log.info('holding the IRC connections');
              // Once the connections of a lease lost before are closed; lost again before its turn came: nothing to open.
              inTurn(async () => {
                await stopping;
                if (lease.held()) await (joined = transport.observeAll());
              });
            },
            onLost: () => {
              // At once, not in turn: an observer still connecting (a server that does not answer)
              // would hold the turn, and the connections must not outlive the lease.
              services.log.warn('lost the IRC lease; closing the IRC connections');
              stopping = transport.stopObserving().catch((err: unknown) => services.log.warn({ err: errorSummary(err) }, 'closing the IRC connections failed'));
              return stopping;
            },
            // The observer not registered for HERALD_SINGLETON_DOWN_MS (the server cannot be reached from here): let another replica try.
            up: () => transport.up,
          }
        : { watch: true },
    );
    services.link('observer', () => (lease.held() ? transport.up : undefined));
    // Wait a little for the lease and the link, so a healthy start is ready at once; a down server does not block.
    const deadline = Date.now() + 5_000;
    while (services.dispatching && !lease.held() && lease.holder() === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    if (lease.held()) {
      while (joined === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      await Promise.race([joined, new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now())).unref())]);
    }
    return {
      facets: transport,
      readiness: () => ({ irc: lease.held() ? (transport.up ? 'ok' : 'unavailable') : stateOf(lease) }),
      async close() {
        // Close the connections before giving the lease up, so another replica's never overlap them.
        await transport.close();
        await Promise.all([turns, stopping]);
        await lease.close();
      },
    };
  },
});
