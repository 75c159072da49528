import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Client, IrcLine } from 'irc-framework';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { IrcConnection } from '../src/platforms/irc/irc-connection.js';
import { IrcQueries } from '../src/platforms/irc/irc-queries.js';
import { waitFor } from './support/wait.js';

const log = pino({ level: 'silent' });

const line = (command: string, params: string[], nick = ''): IrcLine => ({ command, params, tags: {}, prefix: nick, nick, ident: '', hostname: '' });

/** The client IrcQueries writes to: records what it sends. */
function fakeClient(nick: string): { client: Client; sent: string[][] } {
  const sent: string[][] = [];
  const client = { user: { nick }, raw: (...args: string[]) => void sent.push(args) } as unknown as Client;
  return { client, sent };
}

/**
 * A server that answers in order, each answer `lag` ms late, and ignores a JOIN of a channel the
 * nick is already in (as InspIRCd does): enough of IRC for irc-framework to register and join.
 */
async function laggingServer(): Promise<{ server: Server; port: number; lag: { ms: number }; joins: string[] }> {
  const lag = { ms: 0 };
  const joins: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let nick = '*';
    const inside = new Set<string>();
    let last = Promise.resolve();
    const answer = (text: string): void => {
      const delay = lag.ms;
      last = last.then(() => new Promise<void>((r) => setTimeout(() => (socket.destroyed || socket.write(`${text}\r\n`), r()), delay)));
    };
    let buffer = '';
    socket.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('utf8');
      for (let i = buffer.indexOf('\r\n'); i >= 0; i = buffer.indexOf('\r\n')) {
        const [command = '', ...params] = buffer.slice(0, i).split(' ');
        buffer = buffer.slice(i + 2);
        if (command === 'CAP' && params[0] === 'LS') answer(':fake CAP * LS :');
        else if (command === 'NICK') nick = params[0] ?? nick;
        else if (command === 'USER') answer(`:fake 001 ${nick} :welcome`);
        else if (command === 'PING') answer(`:fake PONG fake ${params.at(-1)?.replace(/^:/, '') ?? ''}`);
        else if (command === 'JOIN' && params[0] !== undefined) {
          joins.push(params[0]);
          if (inside.has(params[0].toLowerCase())) continue;
          inside.add(params[0].toLowerCase());
          answer(`:${nick}!u@h JOIN ${params[0]}`);
        }
      }
    });
  });
  server.on('close', () => sockets.forEach((s) => s.destroy()));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, lag, joins };
}

describe('joining an IRC channel', () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('a second join() while one is under way waits for it, sends no second JOIN, and both resolve', async () => {
    const { client, sent } = fakeClient('herald');
    const queries = new IrcQueries(client, 'herald');
    const first = queries.join('#agents', 5_000);
    // The server lets us in; before its PONG, another caller joins the same channel.
    queries.read('JOIN', line('JOIN', ['#agents'], 'herald'));
    const second = queries.join('#Agents', 5_000);
    expect(queries.joining('#agents')).toBe(true);
    const token = sent.find(([c]) => c === 'PING')?.[1];
    expect(token).toBeDefined();
    queries.read('PONG', line('PONG', ['fake', token ?? '']));
    await expect(first).resolves.toBeUndefined();
    await expect(second).resolves.toBeUndefined();
    expect(sent.filter(([c]) => c === 'JOIN')).toHaveLength(1);
    expect(queries.joining('#agents')).toBe(false);
  });

  it('a JOIN refused while another caller waits rejects both', async () => {
    const { client } = fakeClient('herald');
    const queries = new IrcQueries(client, 'herald');
    const first = queries.join('#closed', 5_000);
    const second = queries.join('#closed', 5_000);
    queries.read('473', line('473', ['herald', '#closed', 'Cannot join channel (+i)']));
    await expect(first).rejects.toThrow(/refused to join #closed \(473\)/);
    await expect(second).rejects.toThrow(/refused to join #closed \(473\)/);
  });

  it('a JOIN answered after join() gave up counts: the next join() resolves instead of reading the silence as a refusal', async () => {
    const fake = await laggingServer();
    cleanup.push(() => new Promise<void>((r) => fake.server.close(() => r())));
    const conn = new IrcConnection({ server: { host: '127.0.0.1', port: fake.port, tls: false }, nick: 'herald', log, linesPerSecond: 50, echoTimeoutMs: 5_000 });
    cleanup.push(() => conn.close());
    await conn.connect();
    fake.lag.ms = 400;
    await expect(conn.join('#slow', 50)).rejects.toThrow(/no answer to JOIN #slow/);
    // The server's answer arrives late: the connection is in the channel.
    await waitFor(() => conn.readingSince('#slow') !== undefined, 'the late JOIN to be read', 5_000);
    fake.lag.ms = 0;
    await expect(conn.join('#slow', 2_000)).resolves.toBeUndefined();
    expect(conn.channels).toContain('#slow');
    expect(fake.joins).toEqual(['#slow']);
  });
});
