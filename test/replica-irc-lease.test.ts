import { createServer, type Server, type Socket } from 'node:net';
import type { Kysely } from 'kysely';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/infra/clock.js';
import type { Singleton } from '../src/infra/db/singleton.js';
import { irc, type IrcConfig } from '../src/platforms/irc/index.js';
import type { SingletonRequest } from '../src/platforms/singletons.js';
import { waitFor } from './support/wait.js';

/**
 * The IRC lease is lost while the observer is still connecting to a server that never answers:
 * the connection is dropped at once, not after the connect attempt (which may never end).
 */
describe('IRC lease lost during a connect that hangs', () => {
  let server: Server;
  const sockets: Socket[] = [];
  let port = 0;

  beforeAll(async () => {
    // Accepts, reads, never answers: registration hangs for good.
    server = createServer((s) => {
      sockets.push(s);
      s.on('error', () => undefined);
      s.resume();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('closes the hanging connection as soon as the lease is lost', async () => {
    let held = false;
    let request: SingletonRequest | undefined;
    const lease: Singleton = { name: 'irc:observer', held: () => held, holder: () => (held ? 'me' : undefined), close: async () => undefined, standDown: async () => undefined };
    const config: IrcConfig = {
      url: `irc://127.0.0.1:${port}`,
      nick: 'herald',
      password: undefined,
      channels: ['#agents'],
      linesPerSecond: 10,
      echoTimeoutMs: 1_000,
      senderIdleMs: 60_000,
      retentionDays: 1,
      retentionLines: 100,
    };
    const started = await irc.start(config, {
      store: { kind: 'pglite' },
      // Never reached: nothing registers.
      db: {} as Kysely<unknown>,
      clock: systemClock,
      log: pino({ level: 'silent' }),
      registry: new Registry(),
      serving: false,
      dispatching: true,
      ownMessage: async () => undefined,
      ledger: { find: async () => undefined, noncesOf: async () => new Map() },
      link: () => undefined,
      singleton: (_name, r) => ((request = r), lease),
      adminGate: () => ({ ok: false, status: 503, error: 'admin not configured' }),
    });
    try {
      held = true;
      request?.onAcquired?.();
      await waitFor(() => sockets.some((s) => !s.closed), 'the observer to connect');
      held = false;
      const lost = performance.now();
      request?.onLost?.();
      // Before: the close waited behind the connect attempt, which never ends.
      await waitFor(() => sockets.every((s) => s.closed || s.readableEnded), 'the connection to be dropped', 3_000);
      expect(performance.now() - lost).toBeLessThan(3_000);
    } finally {
      await started.close();
    }
  }, 30_000);
});
