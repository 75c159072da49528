import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/**
 * A round-robin HTTP proxy on 127.0.0.1 in front of several upstreams (replicas of one service):
 * each request goes to the next upstream in turn, whatever connection it came on (a TCP proxy
 * would pin a keep-alive connection, so all of a client's requests, to one upstream). Bodies are
 * streamed both ways; nothing is logged.
 *
 * `hold(body)` picks requests whose answer is withheld: forwarded, answered upstream, and kept
 * from the client until `cutHeld()` drops its connection (a stream broken mid-call, after the
 * upstream did the work).
 */
export interface RoundRobinProxy {
  readonly url: string;
  /** Requests each upstream was given, in the order the upstreams were named. */
  readonly served: readonly number[];
  /** Requests withheld so far whose upstream has answered (hold). */
  readonly heldAnswered: number;
  /** Drops the client connection of every withheld request. */
  cutHeld(): void;
  close(): Promise<void>;
}

export interface RoundRobinOptions {
  /** Withhold the answer to a request with this body (read whole before it is forwarded). */
  hold?: (body: string) => boolean;
}

export async function startRoundRobinProxy(upstreamPorts: readonly number[], options: RoundRobinOptions = {}): Promise<RoundRobinProxy> {
  const served = upstreamPorts.map(() => 0);
  let next = 0;
  let heldAnswered = 0;
  const held = new Set<ServerResponse>();

  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer): void => {
    const i = next;
    next = (next + 1) % upstreamPorts.length;
    served[i] = (served[i] ?? 0) + 1;
    const withhold = options.hold?.(body.toString('utf8')) === true;
    const upstream = httpRequest({ host: '127.0.0.1', port: upstreamPorts[i], method: req.method, path: req.url, headers: req.headers }, (answer) => {
      if (withhold) {
        heldAnswered += 1;
        held.add(res);
        answer.resume();
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    res.on('close', () => upstream.destroy());
    upstream.end(body);
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => forward(req, res, Buffer.concat(chunks)));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    served,
    get heldAnswered() {
      return heldAnswered;
    },
    cutHeld() {
      for (const res of held) res.destroy();
      held.clear();
    },
    async close() {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
