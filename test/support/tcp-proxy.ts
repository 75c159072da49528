import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of one upstream (a PostgreSQL, a platform sandbox), for
 * partition tests: `cut()` drops every live connection and blackholes new ones (they are accepted
 * and never forwarded, never answered: what a peer behind a dead link sees) until `heal()`;
 * `cutNew()` blackholes only new connections and leaves live ones flowing. Bytes are forwarded
 * as they come; nothing is read or logged.
 */
export interface TcpProxy {
  /** The port the proxy listens on (127.0.0.1). */
  readonly port: number;
  /** Whether new connections are blackholed now. */
  readonly isCut: boolean;
  /** Connections forwarded so far (for tests and reports). */
  readonly forwarded: number;
  /** Drop live connections and blackhole new ones until heal(). */
  cut(): void;
  /** Blackhole new connections; live ones keep flowing. */
  cutNew(): void;
  /** Forward new connections again; blackholed ones are dropped (their peer retries). */
  heal(): void;
  /** Stop listening and drop every connection. */
  close(): Promise<void>;
}

export interface TcpProxyOptions {
  readonly upstreamHost?: string;
  readonly upstreamPort: number;
  /** Listen on this port (0 or absent: one the OS picks). */
  readonly port?: number;
  /**
   * Called with each chunk a client sends, as it is forwarded (e.g. to see that a request of a
   * given kind just left one replica). Read-only: the chunk is forwarded as it is.
   */
  readonly onClientData?: (chunk: Buffer) => void;
}

export async function startTcpProxy(options: TcpProxyOptions): Promise<TcpProxy> {
  const upstreamHost = options.upstreamHost ?? '127.0.0.1';
  const live = new Set<Socket>();
  const held = new Set<Socket>();
  let cut = false;
  let forwarded = 0;

  const destroyPair = (a: Socket, b: Socket | undefined): void => {
    a.destroy();
    b?.destroy();
  };

  const server: Server = createServer((client) => {
    client.on('error', () => undefined);
    if (cut) {
      // Blackhole: accept, read nothing onward, answer nothing.
      held.add(client);
      client.on('close', () => held.delete(client));
      client.resume();
      return;
    }
    forwarded += 1;
    const upstream = createConnection({ host: upstreamHost, port: options.upstreamPort });
    upstream.on('error', () => undefined);
    live.add(client);
    live.add(upstream);
    const forget = (): void => {
      live.delete(client);
      live.delete(upstream);
      destroyPair(client, upstream);
    };
    client.on('close', forget);
    upstream.on('close', forget);
    const tap = options.onClientData;
    if (tap !== undefined) client.on('data', (chunk: Buffer) => tap(chunk));
    client.pipe(upstream);
    upstream.pipe(client);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;

  const dropAll = (sockets: Set<Socket>): void => {
    for (const socket of [...sockets]) socket.destroy();
    sockets.clear();
  };

  return {
    port,
    get isCut() {
      return cut;
    },
    get forwarded() {
      return forwarded;
    },
    cut() {
      cut = true;
      dropAll(live);
    },
    cutNew() {
      cut = true;
    },
    heal() {
      cut = false;
      dropAll(held);
    },
    async close() {
      cut = true;
      dropAll(live);
      dropAll(held);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
