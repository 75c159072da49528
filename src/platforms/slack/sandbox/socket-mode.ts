import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';

/**
 * Slack's Socket Mode: apps.connections.open hands out a single-use WebSocket URL
 * (`ws://host:port/link/?ticket=…&app_id=…`); on connecting the app gets `{"type":"hello"}`, then
 * envelopes `{"envelope_id","type","payload","accepts_response_payload"}` it acknowledges with
 * `{"envelope_id","payload"}` within 3 seconds. The server pings every few seconds (the client
 * drops a connection that goes 30 s without one). On close every app is told
 * `{"type":"disconnect"}` and its connection is closed.
 * https://docs.slack.dev/apis/events-api/using-socket-mode
 */

const ACK_TIMEOUT_MS = 3_000;
const PING_EVERY_MS = 10_000;
const CLOSE_WAIT_MS = 1_000;
const DISCONNECT = { type: 'disconnect', reason: 'refresh_requested', debug_info: { host: 'applink-sandbox' } };

interface Pending {
  resolve: (payload: Record<string, unknown>) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export class SocketMode {
  private readonly wss = new WebSocketServer({ noServer: true });
  private readonly tickets = new Set<string>();
  /** Open connections, oldest first; envelopes go to the newest. */
  private readonly sockets: WebSocket[] = [];
  private readonly pending = new Map<string, Pending>();
  private readonly pinger: NodeJS.Timeout;
  private readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => this.upgrade(req, socket, head);

  constructor(
    private readonly server: Server,
    private readonly appId: string,
    private readonly url: () => string,
  ) {
    server.on('upgrade', this.onUpgrade);
    this.pinger = setInterval(() => {
      for (const ws of this.sockets) ws.ping();
    }, PING_EVERY_MS);
    this.pinger.unref();
  }

  /** apps.connections.open: a URL good for one connection, at `origin` (where the app reached the API; default the sandbox's own). */
  open(origin = this.url()): string {
    const ticket = randomBytes(16).toString('hex');
    this.tickets.add(ticket);
    return `${origin.replace(/^http/, 'ws')}/link/?ticket=${ticket}&app_id=${this.appId}`;
  }

  connected(): boolean {
    return this.sockets.length > 0;
  }

  /** Socket Mode connections open now. */
  connections(): number {
    return this.sockets.length;
  }

  /**
   * Send an envelope to the app; resolves with its acknowledgement's payload (`{}` when it sent
   * none), rejects when no app is connected or none acknowledges within 3 seconds.
   */
  deliver(type: 'slash_commands' | 'events_api', payload: Record<string, unknown>): Promise<Record<string, unknown>> {
    const ws = this.sockets[this.sockets.length - 1];
    if (ws === undefined) return Promise.reject(new Error('no app is connected over Socket Mode'));
    const envelopeId = randomBytes(16).toString('hex');
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(envelopeId);
        reject(new Error(`the app did not acknowledge the ${type} envelope within ${ACK_TIMEOUT_MS} ms`));
      }, ACK_TIMEOUT_MS);
      this.pending.set(envelopeId, { resolve, reject, timer });
      ws.send(JSON.stringify({ envelope_id: envelopeId, type, payload, accepts_response_payload: type === 'slash_commands', retry_attempt: 0, retry_reason: '' }));
    });
  }

  /** Ask every app to reconnect: `disconnect` (refresh_requested); the app closes and opens a new connection. */
  refresh(): void {
    for (const ws of this.sockets) ws.send(JSON.stringify(DISCONNECT));
  }

  /** Tell every app to go (`disconnect`, refresh_requested) and close the connections. */
  async close(): Promise<void> {
    clearInterval(this.pinger);
    this.server.off('upgrade', this.onUpgrade);
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new Error('the Slack sandbox closed'));
      this.pending.delete(id);
    }
    const sockets = [...this.sockets];
    await Promise.all(
      sockets.map(
        (ws) =>
          new Promise<void>((resolve) => {
            const timer = setTimeout(() => ws.terminate(), CLOSE_WAIT_MS);
            ws.once('close', () => {
              clearTimeout(timer);
              resolve();
            });
            ws.send(JSON.stringify(DISCONNECT));
            ws.close(1001, 'going away');
          }),
      ),
    );
    this.wss.close();
  }

  private upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://sandbox');
    const ticket = url.searchParams.get('ticket') ?? '';
    if (url.pathname !== '/link/' || !this.tickets.delete(ticket)) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws));
  }

  private accept(ws: WebSocket): void {
    this.sockets.push(ws);
    ws.on('close', () => {
      const index = this.sockets.indexOf(ws);
      if (index >= 0) this.sockets.splice(index, 1);
    });
    ws.on('error', () => ws.terminate());
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      let ack: { envelope_id?: unknown; payload?: unknown };
      try {
        ack = JSON.parse(data.toString()) as typeof ack;
      } catch {
        return;
      }
      const pending = typeof ack.envelope_id === 'string' ? this.pending.get(ack.envelope_id) : undefined;
      if (pending === undefined || typeof ack.envelope_id !== 'string') return;
      this.pending.delete(ack.envelope_id);
      clearTimeout(pending.timer);
      pending.resolve(typeof ack.payload === 'object' && ack.payload !== null ? (ack.payload as Record<string, unknown>) : {});
    });
    ws.send(
      JSON.stringify({
        type: 'hello',
        num_connections: this.sockets.length,
        debug_info: { host: 'applink-sandbox', build_number: 1, approximate_connection_time: 18060 },
        connection_info: { app_id: this.appId },
      }),
    );
  }
}
