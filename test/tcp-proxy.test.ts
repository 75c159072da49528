import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { waitFor } from './support/wait.js';

/** An echo server: each line comes back prefixed with "echo:". */
async function startEcho(): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.on('data', (chunk) => socket.write(`echo:${chunk.toString('utf8')}`));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  return { server, port: typeof address === 'object' && address !== null ? address.port : 0 };
}

interface Probe {
  socket: Socket;
  received: string;
  closed: boolean;
}

function connect(port: number): Probe {
  const socket = createConnection({ host: '127.0.0.1', port });
  const probe: Probe = { socket, received: '', closed: false };
  socket.on('error', () => undefined);
  socket.on('data', (chunk) => (probe.received += chunk.toString('utf8')));
  socket.on('close', () => (probe.closed = true));
  return probe;
}

describe('test support: TCP proxy (partition tests)', () => {
  let echo: { server: Server; port: number };
  let proxy: TcpProxy;
  const probes: Probe[] = [];
  const open = (): Probe => {
    const probe = connect(proxy.port);
    probes.push(probe);
    return probe;
  };

  beforeAll(async () => {
    echo = await startEcho();
    proxy = await startTcpProxy({ upstreamPort: echo.port });
  });
  afterAll(async () => {
    for (const probe of probes) probe.socket.destroy();
    await proxy.close();
    await new Promise<void>((resolve) => echo.server.close(() => resolve()));
  });

  it('forwards both ways', async () => {
    const probe = open();
    probe.socket.write('one');
    await waitFor(() => probe.received === 'echo:one', 'the echo through the proxy');
    expect(proxy.forwarded).toBe(1);
  });

  it('cut() drops live connections and blackholes new ones; heal() forwards again', async () => {
    const before = open();
    before.socket.write('a');
    await waitFor(() => before.received === 'echo:a', 'the echo before the cut');

    proxy.cut();
    expect(proxy.isCut).toBe(true);
    await waitFor(() => before.closed, 'the live connection dropped by the cut');

    // A new connection is accepted (the connect succeeds) and never answered.
    const during = open();
    await new Promise<void>((resolve) => during.socket.once('connect', () => resolve()));
    during.socket.write('b');
    // The proof that nothing came back: a round trip through a healed connection that was
    // opened after it completes while `during` still has nothing.
    const forwardedAtCut = proxy.forwarded;

    proxy.heal();
    expect(proxy.isCut).toBe(false);
    await waitFor(() => during.closed, 'the blackholed connection dropped by the heal');
    expect(during.received).toBe('');
    expect(proxy.forwarded).toBe(forwardedAtCut);

    const after = open();
    after.socket.write('c');
    await waitFor(() => after.received === 'echo:c', 'the echo after the heal');
  });

  it('cutNew() keeps live connections flowing and blackholes new ones', async () => {
    const live = open();
    live.socket.write('x');
    await waitFor(() => live.received === 'echo:x', 'the echo before cutNew');

    proxy.cutNew();
    const fresh = open();
    await new Promise<void>((resolve) => fresh.socket.once('connect', () => resolve()));
    fresh.socket.write('y');
    live.socket.write('z');
    await waitFor(() => live.received === 'echo:xecho:z', 'the live connection still echoing');
    expect(fresh.received).toBe('');
    expect(live.closed).toBe(false);
    proxy.heal();
    await waitFor(() => fresh.closed, 'the blackholed connection dropped by the heal');
  });
});
