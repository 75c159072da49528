import { createServer, Socket, type Server } from 'node:net';
import { stringify } from 'node:querystring';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { fenceWhile, withFence } from '../src/infra/faults/fence.js';
import { TransportError } from '../src/platforms/platform.js';
import { SlackApi } from '../src/platforms/slack/slack-client.js';

/**
 * A Slack create leaves whole, and only after its last check on a connected socket
 * (src/platforms/slack/one-write.ts). Before, `fetch` wrote the request's head and body in
 * separate turns: a process stopped between them sent the head, and the body (the create) left
 * when it was continued, after its lease and the new owner's final look at the channel.
 */
describe('a Slack request leaves in one write, after its last check', () => {
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  afterEach(async () => {
    vi.restoreAllMocks();
    // The client keeps its connections alive: end them, or the server never closes.
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
    server = undefined;
  });

  /** A raw HTTP server answering every request `{"ok":true,…}`; counts the connections it accepted and what it read. */
  async function rawSlack(): Promise<{ url: string; accepted: () => number; received: () => string }> {
    let accepted = 0;
    let received = '';
    const s = createServer((socket) => {
      accepted += 1;
      sockets.add(socket);
      let buffered = '';
      socket.on('data', (chunk) => {
        buffered += chunk.toString('latin1');
        received += chunk.toString('latin1');
        const head = buffered.indexOf('\r\n\r\n');
        const length = Number(/content-length: *(\d+)/i.exec(buffered)?.[1] ?? NaN);
        if (head < 0 || buffered.length < head + 4 + length) return;
        buffered = '';
        const body = '{"ok":true,"channel":"C0GENERAL01","ts":"1700000000.000100"}';
        socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
      });
      socket.on('error', () => undefined);
    });
    server = s;
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    const { port } = s.address() as { port: number };
    return { url: `http://127.0.0.1:${port}/api/`, accepted: () => accepted, received: () => received };
  }

  it('the last check (the fence) runs with the connection already made', async () => {
    const slack = await rawSlack();
    const api = new SlackApi({ token: 'xoxb-test', apiUrl: slack.url, timeoutMs: 5_000 });
    const acceptedAtCheck: number[] = [];
    // The connection is accepted by the server's loop, on this same thread: let it run before the fence is read.
    const fence = fenceWhile(() => {
      acceptedAtCheck.push(slack.accepted());
      return true;
    }, 'the test lease');
    const sent = await withFence(fence, () => api.call('chat.postMessage', { channel: 'C0GENERAL01', text: 'hello' }));
    expect(sent.ok).toBe(true);
    expect(acceptedAtCheck).toEqual([1]);
  });

  it("the request's head and its whole body are handed to the socket in one write", async () => {
    const slack = await rawSlack();
    const api = new SlackApi({ token: 'xoxb-test', apiUrl: slack.url, timeoutMs: 5_000 });
    const writes: string[] = [];
    const write = Socket.prototype.write;
    vi.spyOn(Socket.prototype, 'write').mockImplementation(function (this: Socket, ...args: Parameters<Socket['write']>) {
      const [chunk] = args;
      const bytes = Buffer.from(chunk as string | Uint8Array);
      // An empty write (http's end of a request) carries no byte.
      if (this.remotePort === Number(new URL(slack.url).port) && bytes.length > 0) writes.push(bytes.toString('latin1'));
      return write.apply(this, args);
    });
    const text = 'a message whose body must not trail its head '.repeat(40);
    await api.call('chat.postMessage', { channel: 'C0GENERAL01', text });
    // The second call goes over the connection the first left open (kept alive): one write too.
    await api.call('chat.postMessage', { channel: 'C0GENERAL01', text: `${text} again` });
    expect(slack.accepted()).toBe(1);
    expect(writes).toHaveLength(2);
    for (const [i, write] of writes.entries()) {
      expect(write).toMatch(/^POST \/api\/chat\.postMessage HTTP\/1\.1\r\n/);
      expect(write).toContain(stringify({ text: i === 0 ? text : `${text} again` }));
    }
    expect(slack.received()).toBe(writes.join(''));
  });

  it('a fence that no longer holds on the connected socket keeps the request home: nothing reaches Slack', async () => {
    const slack = await rawSlack();
    const api = new SlackApi({ token: 'xoxb-test', apiUrl: slack.url, timeoutMs: 5_000 });
    // The fence breaks while the connection is being made (as a process stalled there past its lease would find).
    const err = await withFence(
      fenceWhile(() => slack.accepted() === 0, 'the test lease'),
      () => api.call('chat.postMessage', { channel: 'C0GENERAL01', text: 'never' }).catch((e: unknown) => e),
    );
    expect(err).toMatchObject({ name: 'LeaseLostError' });
    // Give the server's loop a turn to read anything that was sent.
    await new Promise((resolve) => setImmediate(resolve));
    expect(slack.received()).toBe('');
  });

  it('a create past its deadline on the connected socket stays home and says so', async () => {
    const slack = await rawSlack();
    const api = new SlackApi({ token: 'xoxb-test', apiUrl: slack.url, timeoutMs: 5_000 });
    const err = await api.call('chat.postMessage', { channel: 'C0GENERAL01', text: 'late' }, { deadline: { notAfter: new Date(Date.now() - 1) } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    expect((err as TransportError).failure).toMatchObject({ kind: 'transient', departedLate: true });
    await new Promise((resolve) => setImmediate(resolve));
    expect(slack.received()).toBe('');
  });

  it('a refused connection is not in doubt: nothing left', async () => {
    const slack = await rawSlack();
    const closed = server;
    server = undefined;
    await new Promise<void>((resolve) => closed?.close(() => resolve()));
    const api = new SlackApi({ token: 'xoxb-test', apiUrl: slack.url, timeoutMs: 5_000 });
    const err = await api.call('chat.postMessage', { channel: 'C0GENERAL01', text: 'nowhere' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    expect((err as TransportError).failure).not.toHaveProperty('mayHaveCreated');
  });

  /** A raw server answering each request's first bytes with `answer` (as it is). */
  async function answering(answer: (socket: Socket) => void): Promise<string> {
    const s = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.once('data', () => answer(socket));
    });
    server = s;
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(s.address() as { port: number }).port}/api/`;
  }

  // From the attacking helper: node:http emits neither 'response' nor 'error' for a 101 with an
  // Upgrade header, and the call hung for good, its job's slot with it.
  it('an answer switching protocols ends the call, in doubt (the request left)', async () => {
    const url = await answering((socket) => socket.write('HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\n'));
    const api = new SlackApi({ token: 'xoxb-test', apiUrl: url, timeoutMs: 5_000 });
    const err = await api.call('chat.postMessage', { channel: 'C1', text: 'hello' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    expect((err as TransportError).failure).toMatchObject({ kind: 'transient', mayHaveCreated: true });
  });

  it('a connection closed without an answer ends the call, in doubt', async () => {
    const url = await answering((socket) => socket.destroy());
    const api = new SlackApi({ token: 'xoxb-test', apiUrl: url, timeoutMs: 5_000 });
    const err = await api.call('chat.postMessage', { channel: 'C1', text: 'hello' }).catch((e: unknown) => e);
    expect((err as TransportError).failure).toMatchObject({ kind: 'transient', mayHaveCreated: true });
  });

  it('a compressed answer is read (as fetch read it)', async () => {
    const body = gzipSync('{"ok":true,"channel":"C1","ts":"1700000000.000200"}');
    const url = await answering((socket) => socket.write(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\ncontent-length: ${body.length}\r\n\r\n`), body])));
    const api = new SlackApi({ token: 'xoxb-test', apiUrl: url, timeoutMs: 5_000 });
    const sent = await api.call<{ ok: boolean; ts?: string }>('chat.postMessage', { channel: 'C1', text: 'hello' });
    expect(sent.ts).toBe('1700000000.000200');
  });
});
