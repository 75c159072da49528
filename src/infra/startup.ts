import { createServer } from 'node:net';

/**
 * A start-up problem the operator fixes by changing the environment (a port, a token, a database):
 * the CLI prints its message as is, without a stack trace, and exits 2 like a configuration error.
 */
export class StartupError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StartupError';
  }
}

/** Port variables that also take `off`. */
const OFF_SWITCH = new Set(['HERALD_METRICS_PORT']);

/**
 * The plain-words version of a failure to listen on `port` (set by the environment variable
 * `variable`), or undefined when `err` is not one the operator can fix that way.
 */
export function listenProblem(err: unknown, host: string, port: number, variable: string): StartupError | undefined {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  switch (code) {
    case 'EADDRINUSE':
      return new StartupError(`port ${port} on ${host} is already in use: set ${variable} to a free port${OFF_SWITCH.has(variable) ? ' (or off)' : ''}, or stop what is using it`, { cause: err });
    case 'EACCES':
      return new StartupError(`not allowed to listen on port ${port} on ${host}: set ${variable} to a port above 1023`, { cause: err });
    case 'EADDRNOTAVAIL':
      return new StartupError(`cannot listen on ${host}: it is not an address of this machine (HOST)`, { cause: err });
    default:
      return undefined;
  }
}

/**
 * Fail before anything starts when a port Herald will listen on is taken, naming the variable that
 * sets it. Port 0 (the system picks a free one) always succeeds. The port is released at once; the
 * real listen maps a loss of that race through listenProblem too.
 */
export async function checkPortFree(host: string, port: number, variable: string): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', (err) => reject(listenProblem(err, host, port, variable) ?? err));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** A port Herald will listen on, and the variable that sets it. */
export interface PortToCheck {
  host: string;
  port: number;
  variable: string;
}

/**
 * Every port of a start-up, checked before anything slow starts (the store, the platforms
 * Herald connects to): two variables naming one port, then each port in turn. Reports the first problem.
 */
export async function checkPortsFree(ports: readonly PortToCheck[]): Promise<void> {
  const wildcard = (host: string): boolean => host === '0.0.0.0' || host === '::';
  for (const [i, a] of ports.entries()) {
    const b = ports.slice(i + 1).find((p) => p.port !== 0 && p.port === a.port && (p.host === a.host || wildcard(p.host) || wildcard(a.host)));
    if (b !== undefined) throw new StartupError(`${a.variable} and ${b.variable} are both ${a.port}: give each its own port`);
  }
  for (const p of ports) await checkPortFree(p.host, p.port, p.variable);
}
